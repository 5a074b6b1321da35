// Package leasefs is the templatefs namespace: the one place that decides
// which paths exist, what they contain, which inode numbers they carry and
// which errno each refused operation gets. Kernel adapters (package fs for
// go-fuse, winfsp for cgofuse) only translate: they look up a Node, call
// one FS method and map the returned error with ToErrno (or FS.Refuse).
// leasefs imports store/, store/manifest and the standard library only.
//
// The tree is one table, kinds in node.go: for each node kind its name,
// parent and fixed name, inode number or class, mode, link count, cache
// policy (Cache), content (Content) and how it renders. Lookup, ReadDir,
// Attr, Open, Node.Ino and the adapters' cache timeouts read it, and
// docs/tree.md (the user-facing contract; docs/leases.md has the
// lifecycles) is generated from it, so a new node kind is one row.
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
