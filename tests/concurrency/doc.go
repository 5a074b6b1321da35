// Package concurrency checks histories of concurrent templatefs operations
// for linearizability with github.com/anishathalye/porcupine
// (fuse-and-store-notes.md §E4, §E5 "concurrency").
//
// A history is a list of porcupine.Operation whose Input is an Input and
// whose Output is an Output: one per tree operation (create, unlink,
// rename, rmdir, a write to a ctl file, readdir, a read of a status file)
// or publication (`templatefs publish`: the tree has no operation for
// it), a process binding a lease (an open with its launch ID, or `pid N`)
// or ending (SIGKILL from the test), with
// the times it was called and returned. Model is the sequential
// specification those operations must be explainable by: the rules of
// docs/tree.md and docs/leases.md and of the store calls behind them
// (store.AcquireLease, BindLeaseSeq, BindLaunched, CancelLeaseSeq,
// KillLeaseSeq, ReleaseLease, Tombstone, Lift, Retire, exit tracking),
// with the errno each refusal maps
// to in leasefs's error table.
//
// # Partitioning
//
// A clone ID holds at most one lease store-wide (EBUSY for another
// generation), and a retiring generation leaves the tree only when its last
// lease is released, so neither generations nor clone IDs are independent
// objects: partitioning by generation would lose the EBUSY rule, and by
// clone ID the retirement rule. The unit of independence is a lease group:
// a set of generations together with the clone IDs that only ever lease
// them. Every operation names its group (Input.Group), generations belong
// to the group that published them, and Partition checks each group on its
// own, keeping every cross-generation rule inside one partition. Listings
// of the top directories (generations/, tombstones/, retiring/, leases/)
// span all groups: Partition gives each group a copy holding only its own
// names (and any name no group owns, which the model then refuses). That
// is weaker than checking the whole listing at one instant, never
// stronger, so it cannot report a false violation.
//
// # Walks
//
// An operation on a path resolves it one name at a time (each a separate
// lookup) before the final call, so it may observe several store states.
// The model therefore accepts a result if some single state explains it:
// ENOENT if the generation was not under the walked directory, EEXIST if
// the clone's lease was on that generation, and so on; each such state is
// a legal linearization point.
//
// A walk can also fail with ESTALE without reaching templatefs: a
// generation directory is one inode that moves between generations/ and
// tombstones/. When a lookup finds it under its new parent while a rename
// holds the kernel's rename lock, the kernel cannot move its cached
// directory entry (Linux fs/dcache.c __d_unalias) and the VFS gives up
// after one retry. The model accepts ESTALE from a tree operation in any
// state, changing nothing; the mount test logs how often it happened.
//
// # Retirement
//
// A retiring generation whose last lease is gone, or whose leases have
// all exited, is deleted by the store in a transaction after the one that
// made it so, but before the call that made it so returns (store.Retire,
// store.ReleaseLease, CancelLease, KillLease). The model keeps such a
// generation with a deadline, that call's return time: an operation
// called later sees it gone, one called earlier may see it either way (a
// nondeterministic step).
//
// # Exits
//
// The daemon records a bound lease exited when its process ends, and
// then finishes a retirement that exit drained: asynchronously, after the
// process is gone. The test's OpExit kills the process and returns only
// once it has seen, through the mount, the lease exited (or gone) and
// such a generation gone, so the model takes the process's end, the
// exited record and the deletion as one step inside OpExit's interval.
// Between the kill and the record, the store already treats the lease's
// process as gone (rm settles it, kill releases it), which the model
// explains by ordering those operations after OpExit.
//
// # Launch IDs
//
// A process carries its launch ID from its start, before it opens a
// payload: the test starts it in its own operation (OpSpawn) and has it
// open in OpBind. A cancel reads /proc once, before its transaction, so
// it may miss a process started while it runs (the model counts only
// processes whose OpSpawn returned before the cancel was called). An
// opener whose open bound its lease can die of a concurrent kill of that
// lease before it reports: OpBind then returns ResultKilled.
package concurrency
