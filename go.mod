module templatefs

go 1.26.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/coreos/go-systemd/v22 v22.7.0
	github.com/creack/pty v1.1.24
	github.com/gofrs/flock v0.13.2
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/schollz/progressbar/v3 v3.19.1
	github.com/winfsp/cgofuse v1.6.0
	go.etcd.io/bbolt v1.5.0
	golang.org/x/sys v0.50.0
	golang.org/x/term v0.48.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
)
