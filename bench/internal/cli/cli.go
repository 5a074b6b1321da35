// Package cli holds what the bench's commands share: how they read their
// arguments and how they fail.
package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Fail prints err after the command's name on stderr and exits 1.
func Fail(err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", filepath.Base(os.Args[0]), err)
	os.Exit(1)
}

// WithArgs calls f when args holds exactly n arguments, and returns its
// error; otherwise an error that says how many it wants.
func WithArgs(args []string, n int, f func() error) error {
	if len(args) != n {
		return fmt.Errorf("want %d arguments, got %d", n, len(args))
	}
	return f()
}

// Count parses a positive integer argument.
func Count(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("count %q: want a positive integer", s)
	}
	return n, nil
}
