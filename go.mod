module github.com/tracebridge/tracebridge

go 1.26

require (
	github.com/google/go-cmp v0.7.0
	github.com/ulikunitz/xz v0.5.17
)
