package leasefs

// Extended attributes of payload files (project issue 5): each carries its
// digest and generation, so a backup can be checked against the index
// without the mount (getfattr -d -m user.templatefs).
const (
	// XattrSHA256 holds the payload's SHA-256 as 64 lowercase hex digits,
	// the digest recorded at publication (store.Artifact.SHA256).
	XattrSHA256 = "user.templatefs.sha256"
	// XattrGeneration holds the payload's generation ID, e.g. "g000003".
	XattrGeneration = "user.templatefs.generation"
)

// Xattr is one extended attribute: its name and value.
type Xattr struct {
	Name  string
	Value []byte
}

// Xattrs returns n's extended attributes in a fixed order: XattrSHA256 and
// XattrGeneration for payload files, none for every other node. Errors:
// store.ErrNotFound when the node's generation is gone, or the store's
// error.
func (f *FS) Xattrs(n Node) ([]Xattr, error) {
	if n.kind != KindPayloadFile {
		return nil, nil
	}
	if err := f.enter("getxattr"); err != nil {
		return nil, err
	}
	defer f.leave()
	g, err := f.st.Generation(n.Generation())
	if err != nil {
		return nil, err
	}
	a, ok := g.Artifact(n.name)
	if !ok {
		return nil, notFound(Node{kind: KindPayloadDir, num: n.num}, n.name)
	}
	return []Xattr{
		{Name: XattrSHA256, Value: []byte(a.SHA256)},
		{Name: XattrGeneration, Value: []byte(g.ID.String())},
	}, nil
}
