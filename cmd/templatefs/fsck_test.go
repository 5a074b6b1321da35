package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"templatefs/store"
)

// cli runs the command line in-process and returns its exit status and
// output.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// mustCLI runs the command line and fails the test unless it exits 0.
func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := cli(t, args...)
	if code != 0 {
		t.Fatalf("templatefs %s: exit %d\n%s", strings.Join(args, " "), code, errOut)
	}
	return out
}

// publishedStore makes a store holding one generation, g000001, of a
// small sample capture and returns the store directory.
func publishedStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	st, capOut := filepath.Join(dir, "store"), filepath.Join(dir, "cap")
	mustCLI(t, "init", st)
	mustCLI(t, "sample-capture", "--memory", "4MiB", capOut)
	out := mustCLI(t, "publish", st, filepath.Join(capOut, "capture"), "--class", filepath.Join(capOut, "class.json"))
	if lines := strings.Split(strings.TrimSpace(out), "\n"); lines[len(lines)-1] != "g000001" {
		t.Fatalf("publish printed %q, want the last line g000001", out)
	}
	return st
}

// burnIDs advances the store's publication sequence to seq, as
// publications that reserved IDs and then crashed do.
func burnIDs(t *testing.T, st string, seq uint64) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(st, store.IndexFile), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("generations")).SetSequence(seq) }); err != nil {
		t.Fatal(err)
	}
}

func TestFsck(t *testing.T) {
	// Each row damages a fresh one-generation store, runs fsck with args
	// (the store path appended) and wants the exit status, the stdout lines
	// in order, and then checks what is left on disk.
	type row struct {
		name   string
		damage func(t *testing.T, st string)
		args   []string
		code   int
		lines  []string
		stderr string // in stderr when code is 1; default: how many problems remain
		after  func(t *testing.T, st string)
	}
	exists := func(rel string, want bool) func(t *testing.T, st string) {
		return func(t *testing.T, st string) {
			_, err := os.Lstat(filepath.Join(st, rel))
			if got := err == nil; got != want {
				t.Errorf("%s exists = %v after fsck, want %v (%v)", rel, got, want, err)
			}
		}
	}
	// A publication that crashed after reserving IDs 2 to 9 left
	// payload/g000009 and staging/g000007.
	leftovers := func(t *testing.T, st string) {
		burnIDs(t, st, 9)
		if err := os.Mkdir(filepath.Join(st, store.StagingDir, "g000007"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(st, store.PayloadDir, "g000009"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	leftoverLines := []string{
		"payload-orphaned payload/g000009: no generation record",
		"staging-leftover staging/g000007: no publication in progress owns it",
	}
	flipByte := func(t *testing.T, st string) {
		p := filepath.Join(st, store.PayloadDir, "g000001", "state.bin")
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, 100); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0xff
		if _, err := f.WriteAt(b, 100); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []row{
		{name: "clean", damage: func(*testing.T, string) {}, code: 0},
		{name: "clean with digests", damage: func(*testing.T, string) {}, args: []string{"--digests"}, code: 0},
		{
			name: "leftovers reported, not removed", damage: leftovers, code: 1, lines: leftoverLines,
			after: func(t *testing.T, st string) {
				exists("staging/g000007", true)(t, st)
				exists("payload/g000009", true)(t, st)
			},
		},
		{
			name: "leftovers repaired", damage: leftovers, args: []string{"--repair"}, code: 0,
			lines: []string{leftoverLines[0] + " (repaired)", leftoverLines[1] + " (repaired)"},
			after: func(t *testing.T, st string) {
				exists("staging/g000007", false)(t, st)
				exists("payload/g000009", false)(t, st)
				exists("payload/g000001/memory.bin", true)(t, st)
			},
		},
		{
			name: "payload ahead of the index is not repairable", args: []string{"--repair"}, code: 1,
			damage: func(t *testing.T, st string) {
				if err := os.Mkdir(filepath.Join(st, store.PayloadDir, "g000009"), 0o700); err != nil {
					t.Fatal(err)
				}
			},
			lines: []string{"payload-ahead payload/g000009: above the publication sequence 1: the index is older than this payload"},
			after: exists("payload/g000009", true),
		},
		{
			name: "damaged index is not repairable", args: []string{"--repair"}, code: 1,
			damage: func(t *testing.T, st string) {
				if err := os.Truncate(filepath.Join(st, store.IndexFile), 3*4096+100); err != nil {
					t.Fatal(err)
				}
			},
			lines:  []string{"index-corrupt index.db: open store STORE: index is damaged: STORE/index.db: the file is 12388 bytes, but its meta page"},
			stderr: "rebuild the store with `templatefs restore BACKUP_DIR NEW_STORE` from a backup of the mount",
			after: func(t *testing.T, st string) {
				if fi, err := os.Stat(filepath.Join(st, store.IndexFile)); err != nil || fi.Size() != 3*4096+100 {
					t.Errorf("index after fsck --repair: %v, %v; want it untouched", fi, err)
				}
			},
		},
		{
			name: "changed byte found only with digests", damage: flipByte, code: 0,
		},
		{
			name: "changed byte with digests", damage: flipByte, args: []string{"--digests"}, code: 1,
			lines: []string{"artifact-digest generation g000001: state.bin has SHA-256 "},
		},
		{
			name: "short artifact is not repairable",
			damage: func(t *testing.T, st string) {
				if err := os.Truncate(filepath.Join(st, store.PayloadDir, "g000001", "state.bin"), 10); err != nil {
					t.Fatal(err)
				}
			},
			args: []string{"--repair"}, code: 1,
			lines: []string{"artifact-size generation g000001: state.bin is 10 bytes, the record says 65536"},
		},
	} {
		t.Run(r.name, func(t *testing.T) {
			st := publishedStore(t)
			r.damage(t, st)
			code, out, errOut := cli(t, append(append([]string{"fsck"}, r.args...), st)...)
			if code != r.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, r.code, errOut)
			}
			var got []string
			if out != "" {
				got = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			}
			if len(got) != len(r.lines) {
				t.Fatalf("stdout has %d lines, want %d:\n%s", len(got), len(r.lines), out)
			}
			for i := range got {
				if want := strings.ReplaceAll(r.lines[i], "STORE", st); !strings.HasPrefix(got[i], want) {
					t.Errorf("line %d = %q, want it to start with %q", i, got[i], r.lines[i])
				}
			}
			if r.stderr == "" {
				r.stderr = "not repaired"
			}
			if r.code == 1 && !strings.Contains(errOut, r.stderr) {
				t.Errorf("stderr %q does not say %q", errOut, r.stderr)
			}
			if r.after != nil {
				r.after(t, st)
			}
		})
	}
}

// TestFsckReadOnly checks that fsck without --repair reports a leftover
// the same way each time and leaves it for the next normal open, which
// removes it.
func TestFsckReadOnly(t *testing.T) {
	st := publishedStore(t)
	burnIDs(t, st, 5) // a publication reserved IDs 2 to 5 and crashed
	orphan := filepath.Join(st, store.PayloadDir, "g000005")
	if err := os.Mkdir(orphan, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		code, out, _ := cli(t, "fsck", st)
		if want := "payload-orphaned payload/g000005: no generation record\n"; code != 1 || out != want {
			t.Fatalf("run %d: exit %d, stdout %q; want exit 1, %q", i, code, out, want)
		}
	}
	if _, err := os.Lstat(orphan); err != nil {
		t.Errorf("fsck removed %s: %v", orphan, err)
	}
	// A normal open (here: settings with a change) recovers.
	mustCLI(t, "settings", "--refuse-reboot", st)
	if _, err := os.Lstat(orphan); err == nil {
		t.Errorf("a normal open left %s", orphan)
	}
	if code, out, errOut := cli(t, "fsck", st); code != 0 || out != "" {
		t.Errorf("fsck after recovery: exit %d, stdout %q, stderr %q; want 0 and nothing", code, out, errOut)
	}
}

func TestFsckStoreInUse(t *testing.T) {
	st := publishedStore(t)
	s, err := store.Open(st, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	code, _, errOut := cli(t, "fsck", st)
	if code != 1 || !strings.Contains(errOut, "in use") || !strings.Contains(errOut, "no daemon serves it") {
		t.Errorf("fsck of a store in use by no daemon: exit %d, stderr %q; want 1 naming the lock and that no daemon serves it", code, errOut)
	}
}

func TestSettings(t *testing.T) {
	defaults := "restore_window: 720h0m0s\nrefuse_reboot: false\nrefuse_other_host: false\n"
	for _, r := range []struct {
		name  string
		init  []string // flags for init
		set   []string // flags for settings; nil shows only
		code  int
		shown string // what a plain settings shows afterwards
	}{
		{name: "defaults", shown: defaults},
		{name: "init flags", init: []string{"--restore-window", "7d", "--refuse-other-host"},
			shown: "restore_window: 168h0m0s\nrefuse_reboot: false\nrefuse_other_host: true\n"},
		{name: "set window", set: []string{"--restore-window", "36h"},
			shown: "restore_window: 36h0m0s\nrefuse_reboot: false\nrefuse_other_host: false\n"},
		{name: "set one flag keeps the others", init: []string{"--restore-window", "2d"}, set: []string{"--refuse-reboot=true"},
			shown: "restore_window: 48h0m0s\nrefuse_reboot: true\nrefuse_other_host: false\n"},
		{name: "clear a flag", init: []string{"--refuse-reboot"}, set: []string{"--refuse-reboot=false"}, shown: defaults},
		{name: "window above OpenVMM's limit", set: []string{"--restore-window", "31d"}, code: 2, shown: defaults},
		{name: "zero window", set: []string{"--restore-window", "0s"}, code: 2, shown: defaults},
		{name: "unparsable window", set: []string{"--restore-window", "soon"}, code: 2, shown: defaults},
		{name: "unparsable bool", set: []string{"--refuse-reboot=maybe"}, code: 2, shown: defaults},
	} {
		t.Run(r.name, func(t *testing.T) {
			st := filepath.Join(t.TempDir(), "store")
			mustCLI(t, append(append([]string{"init"}, r.init...), st)...)
			if r.set != nil {
				code, out, errOut := cli(t, append(append([]string{"settings"}, r.set...), st)...)
				if code != r.code {
					t.Fatalf("settings %v: exit %d, want %d; stderr:\n%s", r.set, code, r.code, errOut)
				}
				if code == 0 && out != r.shown {
					t.Errorf("settings %v printed\n%s\nwant\n%s", r.set, out, r.shown)
				}
			}
			if got := mustCLI(t, "settings", st); got != r.shown {
				t.Errorf("settings shows\n%s\nwant\n%s", got, r.shown)
			}
		})
	}
}

func TestInitBadSettings(t *testing.T) {
	st := filepath.Join(t.TempDir(), "store")
	if code, _, errOut := cli(t, "init", "--restore-window", "40d", st); code != 2 {
		t.Errorf("init with a 40-day window: exit %d, want 2; stderr:\n%s", code, errOut)
	}
	if _, err := os.Lstat(st); err == nil {
		t.Errorf("a refused init created %s", st)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"no-such-command"},
		{"fsck"},
		{"fsck", "a", "b"},
		{"fsck", "--bogus", "a"},
		{"settings"},
		{"init"},
		{"publish", "store"},
		{"sample-capture", "--memory", "lots", "out"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			if code, _, errOut := cli(t, args...); code != 2 {
				t.Errorf("exit %d, want 2; stderr:\n%s", code, errOut)
			}
		})
	}
}
