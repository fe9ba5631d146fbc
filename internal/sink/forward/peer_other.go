//go:build !linux

package forward

import "net"

// peerEnded reports whether the peer closed the connection before the
// reading goroutine noticed; only Linux can tell (see peer_linux.go).
func peerEnded(net.Conn) bool { return false }
