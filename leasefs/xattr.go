package leasefs

import (
	"errors"
	"slices"
	"strings"

	"templatefs/store"
)

// The tree has no extended attributes (project issue 10): `ls -l` asks
// for two per file (security.selinux, system.posix_acl_access), the
// kernel caches neither for FUSE, and each would be a round trip to the
// daemon. Adapters answer every getxattr(2) and listxattr(2) with
// ErrNoXattrs, whose errno is ENOSYS: on the first one the Linux kernel
// records that the file system has no xattrs (fc->no_getxattr,
// no_listxattr) and answers every later call itself, with EOPNOTSUPP. The
// payload digests the user.templatefs.* attributes carried before are the
// generation's SHA256SUMS file (renderSums); the generation ID is in the
// path. A setxattr(2) or removexattr(2) is refused by ChangeXattr.

// ErrNoXattrs is the answer to getxattr(2) and listxattr(2) of any node.
var ErrNoXattrs = errors.New("the tree has no extended attributes")

// SumsFileName is the file of a generation directory listing its
// payload digests in `sha256sum -c` format.
const SumsFileName = "SHA256SUMS"

// sumsView renders <gen>/SHA256SUMS: one line "<sha256>  payload/<artifact>"
// per published artifact (the digest recorded at publication), sorted by
// name, so `cd <gen> && sha256sum -c SHA256SUMS` checks every payload.
func (f *FS) sumsView(n Node) (view, error) {
	g, err := f.st.Generation(n.Generation())
	if err != nil {
		return view{}, err
	}
	arts := slices.SortedFunc(slices.Values(g.Artifacts), func(a, b store.Artifact) int { return strings.Compare(a.Name, b.Name) })
	var b strings.Builder
	for _, a := range arts {
		b.WriteString(a.SHA256 + "  " + KindPayloadDir.facts().entry + "/" + a.Name + "\n")
	}
	v := at(g.PublishedAt)
	v.text = []byte(b.String())
	return v, nil
}
