//go:build !unix

package zico

import "errors"

var errTooManyFiles = errors.New("too many open files")
