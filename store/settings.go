package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// MaxRestoreWindow is OpenVMM's downtime limit: MAX_DOWNTIME_NS (v6) and
// MAX_SNAPSHOT_DOWNTIME (v5), 30 days (openvmm-snapshot-format.md §7). A
// store may narrow it, never widen it.
const MaxRestoreWindow = 30 * 24 * time.Hour

// Settings are a store's eligibility policy, persisted in the index (meta
// row "settings") and shown in MNT/store. A store without the row uses
// DefaultSettings.
type Settings struct {
	// RestoreWindow is the largest age a generation may have and still
	// get new leases, 0 < RestoreWindow <= MaxRestoreWindow. Default
	// MaxRestoreWindow.
	RestoreWindow time.Duration `json:"restore_window_ns"`
	// RefuseReboot refuses captures made on this host in an earlier boot,
	// and captures that carry no host identity (manifest v5, standard
	// machines), which cannot prove they were not. Default false.
	RefuseReboot bool `json:"refuse_reboot"`
	// RefuseOtherHost refuses captures made on another host, and captures
	// that carry no host identity. Default false.
	RefuseOtherHost bool `json:"refuse_other_host"`
}

// DefaultSettings returns the settings of a store that never set any:
// OpenVMM's 30-day window, reboots and other hosts allowed.
func DefaultSettings() Settings {
	return Settings{RestoreWindow: MaxRestoreWindow}
}

// Validate returns ErrInvalidSettings, naming the value, unless the
// window is within (0, MaxRestoreWindow].
func (set Settings) Validate() error {
	if set.RestoreWindow <= 0 || set.RestoreWindow > MaxRestoreWindow {
		return fmt.Errorf("restore window %v: want more than 0 and at most %v (OpenVMM's limit): %w",
			set.RestoreWindow, MaxRestoreWindow, ErrInvalidSettings)
	}
	return nil
}

// Settings returns the store's settings: the stored row, or
// DefaultSettings when there is none.
func (s *Store) Settings() (Settings, error) {
	var set Settings
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		set, err = readSettings(tx)
		return err
	})
	return set, err
}

// SetSettings validates set (ErrInvalidSettings) and stores it in one
// transaction. It applies to the next eligibility decision; leases
// already granted are not affected.
func (s *Store) SetSettings(set Settings) error {
	if err := set.Validate(); err != nil {
		return err
	}
	if err := s.update(faultSettingsCommit, func(tx *bolt.Tx) error { return writeSettings(tx, set, s.now()) }); err != nil {
		return fmt.Errorf("store settings: %w", err)
	}
	failpoint("settings-committed")
	s.log.Info("settings changed", "restore_window", set.RestoreWindow.String(),
		"refuse_reboot", set.RefuseReboot, "refuse_other_host", set.RefuseOtherHost)
	s.emit(Event{Kind: EventSettings})
	return nil
}

// InitWithSettings is Init, with set (validated first: ErrInvalidSettings)
// stored in the same transaction that writes the schema identity.
func InitWithSettings(dir string, set Settings) error {
	if err := set.Validate(); err != nil {
		return fmt.Errorf("init store %s: %w", dir, err)
	}
	return initStore(dir, &set)
}

// readSettings decodes meta/settings strictly: an unknown field or an
// invalid value is ErrInvalidSettings, so a policy written by a newer
// build is never silently loosened.
func readSettings(tx *bolt.Tx) (Settings, error) {
	data := tx.Bucket(bucketMeta).Get(keySettings)
	if data == nil {
		return DefaultSettings(), nil
	}
	var set Settings
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&set); err != nil {
		return Settings{}, fmt.Errorf("index row meta/settings: %v: %w", err, ErrInvalidSettings)
	}
	if err := set.Validate(); err != nil {
		return Settings{}, fmt.Errorf("index row meta/settings: %w", err)
	}
	return set, nil
}

// writeSettings stores set and now as the time the settings changed
// (meta/settings_changed).
func writeSettings(tx *bolt.Tx, set Settings, now time.Time) error {
	if err := putJSON(tx.Bucket(bucketMeta), keySettings, set); err != nil {
		return err
	}
	return tx.Bucket(bucketMeta).Put(keySettingsChanged, []byte(now.UTC().Format(time.RFC3339Nano)))
}

// readSettingsChanged returns when the settings last changed: the
// meta/settings_changed row, or the zero time when there is none (the
// defaults since creation, or an index written before the row existed).
func readSettingsChanged(tx *bolt.Tx) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, string(tx.Bucket(bucketMeta).Get(keySettingsChanged)))
	return t
}

// SettingsChangedAt returns when the settings last changed, or the zero
// time if they never did.
func (s *Store) SettingsChangedAt() (time.Time, error) {
	var t time.Time
	err := s.db.View(func(tx *bolt.Tx) error {
		t = readSettingsChanged(tx)
		return nil
	})
	return t, err
}
