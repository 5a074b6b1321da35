package store_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"templatefs/store"
)

func TestSettings(t *testing.T) {
	dir, st, host := openStore(t)
	if set, err := st.Settings(); err != nil || set != store.DefaultSettings() || set.RestoreWindow != 30*24*time.Hour {
		t.Errorf("Settings of a new store = %+v, %v; want the 30-day default", set, err)
	}
	for _, w := range []time.Duration{0, -1, store.MaxRestoreWindow + 1} {
		if err := st.SetSettings(store.Settings{RestoreWindow: w}); !errors.Is(err, store.ErrInvalidSettings) {
			t.Errorf("window %v: got %v, want ErrInvalidSettings", w, err)
		}
	}
	want := store.Settings{RestoreWindow: store.MaxRestoreWindow, RefuseReboot: true, RefuseOtherHost: true}
	if err := st.SetSettings(want); err != nil {
		t.Fatalf("window of exactly %v: %v", store.MaxRestoreWindow, err)
	}
	want.RestoreWindow = 90 * time.Minute
	if err := st.SetSettings(want); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = reopen(t, dir, host)
	if set, err := st.Settings(); err != nil || set != want {
		t.Errorf("Settings after reopen = %+v, %v; want %+v", set, err, want)
	}
	if info, err := st.Info(); err != nil || info.Settings != want {
		t.Errorf("Info.Settings = %+v, %v; want %+v", info.Settings, err, want)
	}
}

func TestInitWithSettings(t *testing.T) {
	want := store.Settings{RestoreWindow: time.Hour, RefuseOtherHost: true}
	dir := filepath.Join(t.TempDir(), "store")
	if err := store.InitWithSettings(dir, want); err != nil {
		t.Fatal(err)
	}
	st := reopen(t, dir, &fakeHost{})
	if set, err := st.Settings(); err != nil || set != want {
		t.Errorf("Settings = %+v, %v; want %+v", set, err, want)
	}
	// The settings were set at creation, by the clock that dates it.
	info, err := st.Info()
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := st.SettingsChangedAt(); err != nil || changed.Before(info.CreatedAt) || !info.ChangedAt.Equal(changed) {
		t.Errorf("SettingsChangedAt = %v, %v; Info.ChangedAt %v; want both at or after the creation %v", changed, err, info.ChangedAt, info.CreatedAt)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	if err := store.InitWithSettings(bad, store.Settings{}); !errors.Is(err, store.ErrInvalidSettings) {
		t.Errorf("InitWithSettings with a zero window: got %v, want ErrInvalidSettings", err)
	}
}

func TestOpenRefusesBadSettingsRow(t *testing.T) {
	tests := []struct {
		name string
		row  string
	}{
		{"unknown field", `{"restore_window_ns":3600000000000,"refuse_reboot":false,"refuse_other_host":false,"refuse_everything":true}`},
		{"window too wide", `{"restore_window_ns":2592000000000001}`},
		{"not JSON", `30d`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeMeta(t, map[string][]byte{"settings": []byte(tt.row)}, false)
			st, err := store.Open(dir, store.Options{Logger: quietLog})
			if err == nil {
				st.Close()
			}
			if !errors.Is(err, store.ErrInvalidSettings) {
				t.Fatalf("got %v, want ErrInvalidSettings", err)
			}
		})
	}
}

// editIndex runs fn on the index of the closed store in dir.
func editIndex(t *testing.T, dir string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, store.IndexFile), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}
