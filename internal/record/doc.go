// Package record holds tracebridge's record model: record types (a name and
// ordered, typed fields), values, records, batches of records, and the
// catalogue of known types (Kieker's built-in record types, their legacy
// names, and types added at run time from IRL files).
//
// The package does no I/O. Codecs in internal/codec turn bytes into batches
// and back; sources, stages and sinks move batches.
//
// Concurrency: a *Type is immutable once built and may be shared freely. A
// Catalog is safe for concurrent lookups; Add must not race with lookups
// (catalogues are filled before the pipeline starts). A Batch is owned by
// one goroutine at a time.
package record
