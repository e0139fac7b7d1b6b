// Quickstart creates a session, runs a command in it, prints its output and exit code, and
// removes the session.
//
//	go run ./examples/quickstart [SOCKET]   (default: $AIRLOCK_SOCKET, else /run/airlock/airlockd.sock)
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	airlock "airlock.dev/sdk"
)

func main() {
	address := ""
	if len(os.Args) > 1 {
		address = os.Args[1]
	}
	if err := run(context.Background(), address); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, address string) error {
	c, err := airlock.Dial(ctx, address)
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := c.Sessions.Create(ctx, airlock.SessionOptions{})
	if err != nil {
		return err
	}
	defer s.Remove(ctx) // whatever the command does
	fmt.Printf("session %s is %s\n", s.ID(), s.Info.State)
	r, err := s.Exec(ctx, []string{"sh", "-c", "echo hello from $(hostname)"}, nil)
	if err != nil {
		return err
	}
	os.Stdout.Write(r.Stdout)
	fmt.Printf("exit code %d\n", r.ExitCode)
	return nil
}
