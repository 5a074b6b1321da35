package store

import (
	"bytes"

	bolt "go.etcd.io/bbolt"
)

// appendFills makes bbolt fill a bucket's pages full when a write
// transaction only appends to it. bbolt splits a page at the bucket's
// FillPercent when it commits: the default, one half, suits inserts in
// random key order (a half-full page has room for the keys that will
// land in it later), but keys that arrive in order (clone IDs numbered
// by their maker) only ever land in the last page, and every page
// before it would stay half empty. So a bucket whose puts in this
// transaction all sort after its last key before the transaction is
// split full (FillPercent 1), and any other is split at the default.
//
// bbolt runs one write transaction at a time and keeps one Bucket value
// per bucket and transaction, so the state is per index: index.Update
// makes it when its transaction begins and drops it before the commit.
type appendFills map[*bolt.Bucket]*appendFill

// appendFill is what one write transaction has put into one bucket.
type appendFill struct {
	last    []byte // the bucket's last key when the transaction first put into it; nil if empty
	appends bool   // every put so far sorted after last
}

// put records a put of key into b in the current write transaction and
// sets b.FillPercent accordingly; it returns b. A nil appendFills (no
// write transaction of index.Update's) leaves b as it is.
func (f appendFills) put(b *bolt.Bucket, key []byte) *bolt.Bucket {
	if f == nil {
		return b
	}
	a := f[b]
	if a == nil {
		last, _ := b.Cursor().Last()
		a = &appendFill{last: bytes.Clone(last), appends: true}
		f[b] = a
	}
	a.appends = a.appends && (a.last == nil || bytes.Compare(key, a.last) > 0)
	b.FillPercent = bolt.DefaultFillPercent
	if a.appends {
		b.FillPercent = 1
	}
	return b
}
