//go:build windows

package store

import "fmt"

// launchOf is the Linux reader's counterpart: on Windows no launch ID is
// read, so a payload open never binds a lease (BindLaunched logs it at
// debug level); `pid N` binds.
func launchOf(id int) (string, int, error) {
	return "", 0, fmt.Errorf("pid %d: %w", id, errNoEnviron)
}

// launchCarriers cannot scan on Windows: CancelLease logs that the check
// was not made and cancels.
func launchCarriers(string) ([]int, int, error) { return nil, 0, errNoEnviron }
