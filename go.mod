module templatefs

go 1.26.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/coreos/go-systemd/v22 v22.7.0
	github.com/gofrs/flock v0.13.2
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/winfsp/cgofuse v1.6.0
	go.etcd.io/bbolt v1.5.0
	golang.org/x/sys v0.50.0
	google.golang.org/protobuf v1.36.12
)
