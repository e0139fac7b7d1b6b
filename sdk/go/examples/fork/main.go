// Fork forks a session and shows that each copy goes its own way from the same state.
//
//	go run ./examples/fork [SOCKET]
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
	defer s.Remove(ctx)
	if err := s.Files.Write(ctx, "/root/state", []byte("before the fork\n"), 0o644); err != nil {
		return err
	}
	kids, err := s.Fork(ctx, 2) // two copies, each with its own disk, from one snapshot
	if err != nil {
		return err
	}
	for i, kid := range kids {
		defer kid.Remove(ctx)
		line := fmt.Sprintf("echo copy %d >> /root/state; cat /root/state", i)
		r, err := kid.Exec(ctx, []string{"sh", "-c", line}, nil)
		if err != nil {
			return err
		}
		fmt.Printf("%s (%s):\n%s", kid.ID(), kid.Info.Hostname, r.Stdout)
	}
	r, err := s.Exec(ctx, []string{"cat", "/root/state"}, nil)
	if err != nil {
		return err
	}
	fmt.Printf("%s (the original):\n%s", s.ID(), r.Stdout)
	return nil
}
