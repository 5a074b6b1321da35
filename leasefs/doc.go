// Package leasefs is the templatefs namespace: the one place that decides
// which paths exist, what they contain, which inode numbers they carry and
// which errno each refused operation gets. Kernel adapters (package fs for
// go-fuse, winfsp for cgofuse) only translate: they look up a Node, call
// one FS method and map the returned error with ToErrno (or FS.Refuse).
// leasefs imports store/, store/manifest and the standard library only.
//
// The tree (docs/tree.md has the user-facing contract, docs/leases.md the
// lifecycles):
//
//	/                                   dir  0555  ino 1
//	  store                             file 0444  ino 2       store ID, schema, counts
//	  store.db                          file 0444  ino 8       snapshot of the bbolt index, taken at open
//	  events                            file 0444  ino 10      state changes, a JSON line each, a stream per open; not listed
//	  keys/                             dir  0555  ino 3
//	    <key-id>/                       dir  0555  class 0x01  | KeyRecord.Seq
//	      key                           file 0444  class 0x02  | KeyRecord.Seq   canonical key text
//	      generations                   file 0444  class 0x03  | KeyRecord.Seq   generation IDs, newest first
//	      leases/                       dir  0755  class 0x04  | KeyRecord.Seq   create = acquire on the newest eligible generation
//	        <clone-id>                  file 0644  class 0x20  | Lease.Seq       the lease file, a third name
//	  generations/                      dir  0555  ino 4       published generations only
//	    <gen>/                          dir  0555  class 0x10  | GenerationID    rename to tombstones/ = tombstone
//	      manifest                      file 0444  class 0x11  | GenerationID    decoded manifest.bin
//	      status                        file 0444  class 0x12  | GenerationID    state, eligibility, last refusal
//	      ctl                           file 0644  class 0x15  | GenerationID    write tombstone, lift or retire
//	      payload/                      dir  0555  class 0x13  | GenerationID
//	        manifest.bin                file 0444  class 0x18  | GenerationID    the published bytes
//	        state.bin                   file 0444  class 0x19  | GenerationID
//	        memory.bin                  file 0444  class 0x1a  | GenerationID
//	        scratch.img                 file 0444  class 0x1b  | GenerationID    only if captured
//	      leases/                       dir  0755  class 0x14  | GenerationID    create = acquire, unlink = release
//	        <clone-id>                  file 0644  class 0x20  | Lease.Seq       JSON; write `pid N` or `kill`
//	  leases/                           dir  0755  ino 5       every lease; unlink = release
//	    <clone-id>                      file 0644  class 0x20  | Lease.Seq       same node as above
//	  tombstones/                       dir  0555  ino 6       tombstoned generations; rename back = lift, rmdir = retire
//	    <gen>/                          same nodes as generations/<gen>/
//	  retiring/                         dir  0555  ino 7       retiring generations, until their last lease is released
//	    <gen>/                          same nodes as generations/<gen>/
//	  incoming/                         dir  0755  ino 9       mkdir = a staging directory (incoming.go)
//	    <name>/                         dir  0700  class 0x30  | backing dir ino
//	      <file>                        file 0600  class 0x31  | backing file ino  real file I/O on the backing file
//	      ctl                           file 0644  class 0x32  | backing dir ino   write publish
//	      status                        file 0444  class 0x33  | backing dir ino   open, published <gen> or refused
//
// An inode number is class<<56 | object number, where the object number is
// a persistent store identity (see Node.Ino). Numbers are therefore the same
// across unmounts and daemon restarts, and never reused for another object:
// generation IDs and lease sequence numbers are never handed out twice, and
// key sequence numbers are fixed at first use. Incoming nodes are the
// exception: they carry their backing file's inode number, stable while
// it exists (and kept by a rename within its directory), which the file
// system may reuse once it is gone. A Node is identified by its
// kind and object only, never by the path it was reached through: the
// generation directory under generations/, tombstones/ and retiring/ is
// the same Node (it is in exactly one, by its state), and a lease file is
// the same Node (Nlink 3) under generations/<gen>/leases/, leases/ and
// keys/<key-id>/leases/.
//
// Conventions, as in rclone's vfs:
//   - Paths given to Walk are io/fs paths: slash-separated, no leading or
//     trailing slash, "." for the root.
//   - Methods return errors wrapping a store sentinel or one of the
//     sentinels in errors.go; errno.go maps them to an Errno, first
//     errors.Is match wins, and docs/errno.md is rendered from the same rows.
//   - Lookups that fail are not logged (ENOENT is routine); refused
//     mutations are logged once, by FS.Refuse, with op, path, errno and
//     error text; an error without a row becomes EIO and is logged with its
//     whole chain.
//   - Mutating methods take the Caller; only the store owner and root may
//     change anything (ErrAccess, checked first). Reads take no Caller.
//   - A refused create, unlink, rmdir, rename or lease/ctl write is also
//     remembered, per generation and in memory only, as the generation's
//     last refusal, shown in its status: an errno alone loses the reason.
//   - An FS is safe for concurrent use; every call reads the store afresh,
//     so the tree always shows committed state.
package leasefs
