package store

import (
	"errors"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseStartTime(t *testing.T) {
	tail := " S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 19 20\n"
	tests := []struct {
		name    string
		line    string
		want    uint64
		wantErr bool
	}{
		{"plain", "77 (sleep)" + tail, 424242, false},
		{"name with spaces and parentheses", "77 (a) b (c)) d)" + tail, 424242, false},
		{"no closing parenthesis", "77 (sleep" + tail, 0, true},
		{"truncated", "77 (sleep) S 1 2 3", 0, true},
		{"not a number", "77 (sleep) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 x 19\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStartTime("stat", []byte(tt.line))
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("got %d, %v; want %d, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// startSleep starts a real process that lives until the test ends.
func startSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// TestLinuxCheck compares a real, running process with edited copies of
// its identity, through the real /proc and through an empty directory
// standing in for /proc mounted with hidepid=invisible (root sees every
// process, so hiding one for real would need another user and mount).
func TestLinuxCheck(t *testing.T) {
	host := linuxProcesses{procDir: "/proc"}
	hidden := linuxProcesses{procDir: t.TempDir()}
	cmd := startSleep(t)
	id, err := host.Identify(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if id.PID != cmd.Process.Pid || id.StartTime == 0 || len(id.BootID) != 32 {
		t.Fatalf("Identify = %+v: want pid %d, a start time and a 32-digit boot ID", id, cmd.Process.Pid)
	}
	if id.PidfsIno == 0 {
		t.Log("kernel has no pidfs: inode rows compare start times only")
	}
	edit := func(f func(*ProcessIdentity)) ProcessIdentity {
		c := id
		f(&c)
		return c
	}
	tests := []struct {
		name  string
		procs linuxProcesses
		id    ProcessIdentity
		want  ExitVerdict
		pidfs bool // the row needs a pidfs inode number
	}{
		{"same process", host, id, ProcessAlive, false},
		{"pidfs inode differs", host, edit(func(c *ProcessIdentity) { c.PidfsIno++ }), ProcessReused, true},
		{"no pidfs record, same start time", host, edit(func(c *ProcessIdentity) { c.PidfsIno = 0 }), ProcessAlive, false},
		{"no pidfs record, start time differs", host, edit(func(c *ProcessIdentity) { c.PidfsIno, c.StartTime = 0, c.StartTime+1 }), ProcessReused, false},
		{"boot ID differs", host, edit(func(c *ProcessIdentity) { c.BootID = "00000000000000000000000000000001" }), ProcessEarlierBoot, false},
		{"proc hidden, no pidfs record", hidden, edit(func(c *ProcessIdentity) { c.PidfsIno = 0 }), ProcessUninspectable, false},
		{"proc hidden, pidfs inode known", hidden, id, ProcessAlive, true},
		{"no such pid", host, edit(func(c *ProcessIdentity) { c.PID = 1 << 30 }), ProcessExited, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.pidfs && id.PidfsIno == 0 {
				t.Skip("kernel has no pidfs")
			}
			got, err := tt.procs.Check(tt.id)
			if err != nil || got != tt.want {
				t.Errorf("Check = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	if _, err := hidden.Identify(cmd.Process.Pid); !errors.Is(err, ErrProcessUninspectable) {
		t.Errorf("Identify with /proc hidden: got %v, want ErrProcessUninspectable", err)
	}
}

// TestLinuxKill checks that Kill never signals a process whose identity
// differs from the record, kills the recorded one within the wait, and
// counts the unreaped zombie it leaves as exited.
func TestLinuxKill(t *testing.T) {
	host := hostProcesses()
	cmd := startSleep(t)
	id, err := host.Identify(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	other := id
	other.PidfsIno, other.StartTime = 0, id.StartTime+1
	if exited, err := host.Kill(other, time.Second); err != nil || !exited {
		t.Errorf("Kill of a reused PID's record = %v, %v; want exited (the recorded process is gone)", exited, err)
	}
	if v, err := host.Check(id); err != nil || v != ProcessAlive {
		t.Fatalf("after Kill of another identity: %v, %v; want the real process alive, not signalled", v, err)
	}
	if exited, err := host.Kill(id, 10*time.Second); err != nil || !exited {
		t.Fatalf("Kill = %v, %v; want exited", exited, err)
	}
	var info unix.Siginfo
	if err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != nil {
		t.Fatal(err)
	}
	if v, err := host.Check(id); err != nil || v != ProcessExited {
		t.Errorf("Check of the unreaped zombie = %v, %v; want exited", v, err)
	}
	if _, err := host.Identify(cmd.Process.Pid); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Identify of a zombie: got %v, want ErrNoProcess", err)
	}
	if exited, err := host.Kill(id, 0); err != nil || !exited {
		t.Errorf("second Kill = %v, %v; want exited", exited, err)
	}
	if err := cmd.Wait(); err == nil {
		t.Error("sleep exited normally, want killed")
	}
	if v, err := host.Check(id); err != nil || v != ProcessExited {
		t.Errorf("Check after reaping = %v, %v; want exited", v, err)
	}
}
