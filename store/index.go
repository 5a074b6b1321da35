package store

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// restoreAdvice is what an operator does about a damaged index.
const restoreAdvice = "rebuild the store with `templatefs restore BACKUP_DIR NEW_STORE` " +
	"from a backup of the mount (its store.db and generation payloads)"

// indexCorrupt is the ErrIndexCorrupt error for the index file at path:
// what is wrong (detail, often bbolt's words) and what to do.
func indexCorrupt(path string, detail error) error {
	return fmt.Errorf("%w: %s: %v; %s", ErrIndexCorrupt, path, detail, restoreAdvice)
}

// index is the store's bbolt database. Its View and Update guard every
// transaction (guard), so that damage the index shows while the store is
// open fails that call with ErrIndexCorrupt instead of crashing the
// process, and Update refuses with Store.ReadOnly before it begins.
// Everything else is bbolt's.
type index struct {
	*bolt.DB
	st   *Store
	file *os.File // bbolt's descriptor of the file, for Close when stuck
	// otherMeta says why the meta page bbolt does not use was invalid at
	// open (checkIndexFile), nil when both were valid.
	otherMeta error

	// stuck is set when a write transaction that showed damage was left
	// open rather than rolled back (Update); Close then only closes file.
	stuck atomic.Bool
	// stackLogged is set once noteDamage has logged a damage's stack.
	stackLogged atomic.Bool
	// fills is the running write transaction's appendFills.
	fills appendFills
}

// openIndex checks the index file at path (checkIndexFile) and only then
// lets bbolt open and map it, guarded like a transaction: with
// NoFreelistSync bbolt walks the whole page tree at open to rebuild its
// freelist, in a goroutine of its own where a fault or panic could not be
// recovered, so the file is proven walkable first. Errors: ErrIndexCorrupt
// for a damaged file; bbolt's own for others (a lock timeout).
func openIndex(st *Store, path string) (*index, error) {
	otherMeta, err := checkIndexFile(path)
	if err != nil {
		return nil, indexCorrupt(path, err)
	}
	var file *os.File // bbolt's, closed here if its open panics
	opts := &bolt.Options{
		Timeout:        time.Second,
		NoFreelistSync: true,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			file = f
			return f, err
		},
	}
	var db *bolt.DB
	err = guard(func() error {
		var err error
		db, err = bolt.Open(path, 0o600, opts)
		return err
	})
	if _, ok := err.(damage); ok {
		if file != nil {
			file.Close()
		}
		return nil, indexCorrupt(path, err)
	}
	if errors.Is(err, bolt.ErrInvalid) || errors.Is(err, bolt.ErrChecksum) || errors.Is(err, bolt.ErrVersionMismatch) {
		return nil, indexCorrupt(path, err) // what checkIndexFile would have said
	}
	if err != nil {
		return nil, err
	}
	return &index{DB: db, st: st, file: file, otherMeta: otherMeta}, nil
}

// Close closes the database, or when a damaged write transaction was left
// open (stuck) only bbolt's file descriptor, which releases its lock:
// bbolt's Close would wait for that transaction forever.
func (x *index) Close() error {
	if x.stuck.Load() {
		return x.file.Close()
	}
	return x.DB.Close()
}

// View runs fn in a read-only transaction (bolt.DB.View), guarded.
func (x *index) View(fn func(*bolt.Tx) error) error {
	return x.noteDamage(guard(func() error { return x.DB.View(fn) }))
}

// Update runs fn in a read-write transaction and commits it, guarded, as
// bolt.DB.Update does. It returns Store.ReadOnly's error, changing nothing,
// when the store is read-only. When fn or the commit panics, the
// transaction is rolled back only if the index file still passes
// checkIndexFile: with NoFreelistSync a rollback rebuilds bbolt's freelist
// by walking every page in a goroutine of bbolt's own, where a fault would
// kill the process. Otherwise it stays open (end) and Close releases
// only the file.
func (x *index) Update(fn func(*bolt.Tx) error) error {
	if err := x.st.ReadOnly(); err != nil {
		return err
	}
	tx, err := x.DB.Begin(true)
	if err != nil {
		return err
	}
	// fills lives while fn runs, under bbolt's writer lock, which the
	// commit or rollback releases.
	x.fills = appendFills{}
	err = guard(func() error {
		err := fn(tx)
		x.fills = nil
		if err != nil {
			return err
		}
		start := time.Now()
		if err := tx.Commit(); err != nil {
			return err
		}
		x.st.observer().IndexCommit(time.Since(start))
		return nil
	})
	if err != nil {
		_, damaged := err.(damage)
		err = x.noteDamage(err)
		x.end(tx, damaged)
	}
	return err
}

// end rolls back tx after its function or commit failed (a no-op if the
// commit already closed it), unless it showed damage and the index file
// no longer passes checkIndexFile; then tx is left open and the index
// marked stuck. A damaged caller has made the store read-only first, so
// no later Update waits for the writer lock (one already waiting in
// Begin would).
func (x *index) end(tx *bolt.Tx, damaged bool) {
	if !damaged {
		tx.Rollback()
		return
	}
	if _, cerr := checkIndexFile(x.Path()); cerr != nil {
		x.stuck.Store(true)
		x.st.log.Error("damaged write transaction left open, not rolled back", "index", x.Path(), "check", cerr.Error())
		return
	}
	guard(tx.Rollback)
}

// rolledBack runs fn in a read-write transaction that is always rolled
// back, guarded: for bbolt's Tx.Check, which is only safe beside other
// writers on a writable transaction. It changes nothing, so it runs on a
// read-only store too.
func (x *index) rolledBack(fn func(*bolt.Tx) error) error {
	tx, err := x.DB.Begin(true)
	if err != nil {
		return err
	}
	err = guard(func() error { return fn(tx) })
	_, damaged := err.(damage)
	err = x.noteDamage(err)
	x.end(tx, damaged)
	return err
}

// noteDamage turns a damage error from guard into ErrIndexCorrupt, logs
// it (with its stack the first time only: every later read of the same
// damaged page would repeat it) and makes the store read-only: an index
// that showed damage once is not trusted with another change. Other
// errors pass through.
func (x *index) noteDamage(err error) error {
	d, ok := err.(damage)
	if !ok {
		return err
	}
	if x.stackLogged.CompareAndSwap(false, true) {
		x.st.log.Error("index damage found during a transaction; the call fails", "index", x.Path(), "err", d.Error(), "stack", string(d.stack))
	} else {
		x.st.log.Error("index damage found during a transaction; the call fails", "index", x.Path(), "err", d.Error())
	}
	err = indexCorrupt(x.Path(), d)
	x.st.setReadOnly(err)
	return err
}

// damage is a panic recovered by guard: a bbolt assertion on a page that
// does not hold what it should, or a fault reading the mapped file (a
// page beyond its end, an I/O error on a mapped page).
type damage struct {
	value any
	stack []byte
}

func (d damage) Error() string {
	if f, ok := d.value.(interface{ Addr() uintptr }); ok { // a fault (debug.SetPanicOnFault)
		return fmt.Sprintf("reading the mapped file faulted at %#x, so it is shorter than its pages or unreadable (%v)", f.Addr(), d.value)
	}
	return fmt.Sprintf("%v", d.value)
}

// guard runs op, which begins and ends a bbolt transaction in this
// goroutine, with faults on mapped memory turned into panics
// (debug.SetPanicOnFault, which is per goroutine and restored after) and
// returns any panic as a damage error. A panic inside a transaction is
// taken for index damage whatever its cause: the index cannot be trusted
// with further changes either way, and the stack is logged.
func guard(op func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if v := recover(); v != nil {
			err = damage{value: v, stack: debug.Stack()}
		}
	}()
	return op()
}
