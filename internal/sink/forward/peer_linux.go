package forward

import (
	"net"
	"syscall"
	"unsafe"
)

// Linux's TCP states (include/net/tcp_states.h) that mean the peer ended
// the connection: it sent a FIN (CLOSE_WAIT) or a reset (CLOSE).
const (
	tcpClose     = 7
	tcpCloseWait = 8
)

// peerEnded reports whether the kernel has seen the peer close or reset
// the connection, before the goroutine reading from it may have noticed:
// tcp_info's first byte is the connection's state.
func peerEnded(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var info [8]byte
	var errno syscall.Errno
	err = rc.Control(func(fd uintptr) {
		size := uint32(len(info))
		_, _, errno = syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.IPPROTO_TCP, syscall.TCP_INFO,
			uintptr(unsafe.Pointer(&info[0])), uintptr(unsafe.Pointer(&size)), 0)
	})
	if err != nil || errno != 0 {
		return false
	}
	return info[0] == tcpCloseWait || info[0] == tcpClose
}
