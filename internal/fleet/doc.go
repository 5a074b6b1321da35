// Package fleet joins a host's store to a fleet through etcd
// (docs/fleet.md): it records the generations the host holds by fleet
// identity (the catalog, alive while the host's etcd lease is), writes the
// tombstones and lifts this host queued, and watches the fleet's
// tombstones, applying each one to the host's store.
//
// The store stays the source of truth for what this host grants: the
// package never refuses or grants anything itself. It reaches the store
// only through the Store interface (package templatefs/store is not
// imported here: internal packages are cross-built for macOS, and the
// store is not), so the daemon passes an adapter in.
//
// etcd key layout under the prefix P (Config.Prefix):
//
//	P/hosts/<host ID>                 HostRecord, under the host's etcd lease
//	P/catalog/<fleet ID>/<host ID>    CatalogEntry, under the host's etcd lease
//	P/tombstones/<fleet ID>           TombstoneRecord (state tombstoned or lifted); no lease
//
// A lift is a put of a record in state "lifted", not a delete, so a host
// that comes back finds every change since its last revision by a range
// read (WithMinModRev) and knows when its resumed watch has caught up. A
// delete (by an operator, etcdctl del) is read as a lift.
package fleet
