// Package streammsg is the wire format of tracebridge's live stream
// (docs/STREAM.md): the subjects records, traces, metadata and control
// commands travel on, the data messages (a compact binary form and a JSON
// form a script reads without our code), the metadata message and the
// control requests and replies.
//
// A data message holds the records of one part of a batch the bridge
// received: the records of one type from one host. Its header names every
// part of the batch and the positions of its own records, so a
// subscriber to several types puts the batch back in the order the
// bridge received it, and counts per subject show it what it missed.
// Records are decoded only when asked (Message.Records), so a subscriber
// skips the types it does not want for the cost of a header.
//
// The codec does no I/O. Limits (parts, records, strings, arrays) are
// explicit; a decoder error names the byte offset and wraps ErrMalformed.
// An Encoder or a Message is used by one goroutine at a time.
package streammsg
