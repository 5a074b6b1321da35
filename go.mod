module templatefs

go 1.26.0

require (
	github.com/gofrs/flock v0.13.2
	go.etcd.io/bbolt v1.5.0
	golang.org/x/sys v0.50.0
	google.golang.org/protobuf v1.36.12
)

require github.com/hanwen/go-fuse/v2 v2.12.1 // indirect
