//go:build unix

package zico

import "syscall"

// errTooManyFiles is the accept error worth waiting out.
var errTooManyFiles error = syscall.EMFILE
