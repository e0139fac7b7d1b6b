// Stream runs a long command and prints its output as it comes, then how it ended.
//
//	go run ./examples/stream [SOCKET]
package main

import (
	"context"
	"fmt"
	"io"
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
	defer s.Remove(ctx)
	script := "for i in 1 2 3 4 5; do echo step $i; sleep 0.5; done; echo done >&2"
	st, err := s.ExecStream(ctx, []string{"sh", "-c", script}, nil)
	if err != nil {
		return err
	}
	for {
		ev, err := st.Recv()
		if err == io.EOF {
			return nil // the command has ended and the session is free
		}
		if err != nil {
			return err
		}
		switch {
		case ev.Output != nil && ev.Output.Stderr:
			os.Stderr.Write(ev.Output.Data)
		case ev.Output != nil:
			os.Stdout.Write(ev.Output.Data)
		case ev.Exit != nil:
			fmt.Printf("exit code %d\n", ev.Exit.ExitCode)
		}
	}
}
