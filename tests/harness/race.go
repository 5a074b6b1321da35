//go:build linux && race

package harness

// raceEnabled is true when the tests are built with -race; the CLI is then
// built with -race too, so the daemons the tests drive are checked as well.
const raceEnabled = true
