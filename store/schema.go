package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The index is one bbolt file. Its bucket tree:
//
//	meta/
//	  identity      "templatefs-store"            (SchemaIdentity)
//	  version       <uint32 big-endian>          (SchemaVersion)
//	  store_id      <16 random bytes>
//	  created       <RFC 3339 UTC text>
//	  restored_from <16 bytes>                   (optional: the store ID of the backup Restore built this store from)
//	  settings      <JSON Settings>              (optional; absent = DefaultSettings)
//	  settings_changed <RFC 3339 UTC text>       (optional: when settings was last written)
//	  migrating     <uint32 big-endian>          (only while a migration step runs: the version migrated from, migrate.go)
//	generations/    sequence = last publication ID handed out
//	  <gen uint64 BE>  <JSON Generation>         (a retired generation's row is deleted)
//	keys/
//	  <key ID hex>     <JSON KeyRecord>
//	key_generations/
//	  <key ID hex>/
//	    <gen uint64 BE>  ""
//	lease_records/  sequence = last lease sequence number handed out
//	  <clone ID>       <binary Lease>            (leasecodec.go; version 1 had leases/ with JSON rows)
//	tracked_leases/ the leases whose process exit tracking watches (tracked: Bound, Releasing, TeardownFailed with a process)
//	  <clone ID>       ""
//	generation_leases/
//	  <gen uint64 BE>/   sequence = Unix ns of the last lease granted or released (0: none recorded)
//	    <clone ID>     ""
//
// Open reads meta/identity and meta/version before any other row.
var (
	bucketMeta             = []byte("meta")
	bucketGenerations      = []byte("generations")
	bucketKeys             = []byte("keys")
	bucketKeyGenerations   = []byte("key_generations")
	bucketLeases           = []byte("lease_records")
	bucketGenerationLeases = []byte("generation_leases")
	bucketTrackedLeases    = []byte("tracked_leases")

	// indexBuckets are the top-level buckets besides meta that Init
	// makes and Open requires.
	indexBuckets = [][]byte{bucketGenerations, bucketKeys, bucketKeyGenerations, bucketLeases, bucketGenerationLeases, bucketTrackedLeases}

	keyIdentity = []byte("identity")
	keyVersion  = []byte("version")
	keyStoreID  = []byte("store_id")
	keyCreated  = []byte("created")
	keySettings = []byte("settings")

	keyRestoredFrom = []byte("restored_from")
	// keySettingsChanged is optional, so indexes written before it
	// existed open unchanged.
	keySettingsChanged = []byte("settings_changed")
)

// SchemaIdentity names the index format; an index without it, or with
// another, is refused by Open (seed rule: fail closed on unknown metadata).
const SchemaIdentity = "templatefs-store"

// SchemaVersion is the index layout this build reads and writes. Open
// migrates an older version it has a step for (migrate.go) and refuses
// any other, older or newer, naming both. Version 2 holds lease rows in
// binary (leasecodec.go) in lease_records/, and lists the leases exit
// tracking watches in tracked_leases/, so a daemon's start reads those
// rather than every lease.
const SchemaVersion uint32 = 2

func genKey(id GenerationID) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(id))
}

func putJSON(b *bolt.Bucket, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, data)
}

func getJSON(b *bolt.Bucket, key []byte, v any) (bool, error) {
	data := b.Get(key)
	if data == nil {
		return false, nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return true, fmt.Errorf("decode index record %q: %w", key, err)
	}
	return true, nil
}
