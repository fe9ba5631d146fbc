package streammsg

import (
	"fmt"
	"strings"
)

// DefaultPrefix is the first token of every subject of the stream.
const DefaultPrefix = "tracebridge"

// NoHost is the subject token of records whose host is not known.
const NoHost = "-"

// Subjects names the subjects and JetStream streams of one repository.
// The zero value uses DefaultPrefix.
type Subjects struct {
	// Prefix is the first token (default "tracebridge"); bridges sharing
	// one NATS cluster use a prefix each.
	Prefix string
}

func (s Subjects) prefix() string {
	if s.Prefix == "" {
		return DefaultPrefix
	}
	return s.Prefix
}

// Records is the subject of the records of type typ from host:
// PREFIX.records.<host>.<type>, both tokens escaped (EscapeToken), an
// unknown host as NoHost.
func (s Subjects) Records(host, typ string) string {
	return s.prefix() + ".records." + HostToken(host) + "." + EscapeToken(typ)
}

// RecordsFilter is a subject filter for the records of host and type,
// either of which may be empty for any.
func (s Subjects) RecordsFilter(host, typ string) string {
	h, t := "*", "*"
	if host != "" {
		h = HostToken(host)
	}
	if typ != "" {
		t = EscapeToken(typ)
	}
	return s.prefix() + ".records." + h + "." + t
}

// AllRecords is the filter of every record subject.
func (s Subjects) AllRecords() string { return s.prefix() + ".records.>" }

// Traces is the subject of the assembled traces whose root ran on host:
// PREFIX.traces.<host>.
func (s Subjects) Traces(host string) string { return s.prefix() + ".traces." + HostToken(host) }

// AllTraces is the filter of every trace subject.
func (s Subjects) AllTraces() string { return s.prefix() + ".traces.>" }

// Meta is the metadata subject (the last message is retained).
func (s Subjects) Meta() string { return s.prefix() + ".meta" }

// NodeMeta is the metadata subject of a cluster node (the last message
// of each is retained): PREFIX.meta.<node>, the node's name escaped
// (EscapeToken).
func (s Subjects) NodeMeta(node string) string { return s.Meta() + "." + EscapeToken(node) }

// AllNodeMeta is the filter of every node's metadata subject.
func (s Subjects) AllNodeMeta() string { return s.Meta() + ".>" }

// Control is the subject of control requests (NATS request/reply).
func (s Subjects) Control() string { return s.prefix() + ".control" }

// Stream is the name of the JetStream stream that holds records and
// traces: the prefix in upper case, other bytes than letters and digits
// as '_' ("TRACEBRIDGE").
func (s Subjects) Stream() string { return streamName(s.prefix()) }

// MetaStream is the name of the JetStream stream that retains the last
// metadata message ("TRACEBRIDGE_META").
func (s Subjects) MetaStream() string { return streamName(s.prefix()) + "_META" }

func streamName(p string) string {
	b := []byte(strings.ToUpper(p))
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	return string(b)
}

// ValidatePrefix checks a subject prefix: one or more tokens of letters,
// digits, '-' and '_', separated by dots.
func ValidatePrefix(p string) error {
	if p == "" {
		return nil
	}
	for _, tok := range strings.Split(p, ".") {
		if tok == "" {
			return fmt.Errorf("subject prefix %q: empty token", p)
		}
		for i := 0; i < len(tok); i++ {
			if !tokenByte(tok[i]) && tok[i] != '_' {
				return fmt.Errorf("subject prefix %q: want letters, digits, '-', '_' and dots", p)
			}
		}
	}
	return nil
}

// HostToken is the subject token of a host: EscapeToken(host), NoHost for
// the empty host.
func HostToken(host string) string {
	if host == "" {
		return NoHost
	}
	return EscapeToken(host)
}

// tokenByte reports whether c stands for itself in a token.
func tokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

const hexDigits = "0123456789ABCDEF"

// EscapeToken turns a host or type name into one subject token that
// reads like the name: '.' becomes '_'; letters, digits and '-' stay;
// every other byte (the '_' itself, '%', '*', '>', spaces, non-ASCII
// bytes) becomes %XX, two upper-case hex digits. A name that is exactly
// "-" becomes "%2D" (NoHost is "-"). UnescapeToken reverses it.
//
//	kieker.common.record.flow.trace.TraceMetadata → kieker_common_record_flow_trace_TraceMetadata
//	web-01.example.com                            → web-01_example_com
//	my_host                                       → my%5Fhost
func EscapeToken(s string) string {
	if s == NoHost {
		return "%2D"
	}
	clean := true
	for i := 0; i < len(s); i++ {
		if !tokenByte(s[i]) {
			clean = false
			break
		}
	}
	if clean && s != "" {
		return s
	}
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.':
			b = append(b, '_')
		case tokenByte(c):
			b = append(b, c)
		default:
			b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
		}
	}
	return string(b)
}

// UnescapeToken reverses EscapeToken ("-" is the empty host).
func UnescapeToken(tok string) (string, error) {
	if tok == NoHost {
		return "", nil
	}
	b := make([]byte, 0, len(tok))
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case c == '_':
			b = append(b, '.')
		case c == '%':
			if i+2 >= len(tok) {
				return "", fmt.Errorf("subject token %q: %% at %d without two hex digits", tok, i)
			}
			hi, lo := unhex(tok[i+1]), unhex(tok[i+2])
			if hi < 0 || lo < 0 {
				return "", fmt.Errorf("subject token %q: %% at %d without two hex digits", tok, i)
			}
			b = append(b, byte(hi<<4|lo))
			i += 2
		case tokenByte(c):
			b = append(b, c)
		default:
			return "", fmt.Errorf("subject token %q: byte %q is not escaped", tok, c)
		}
	}
	return string(b), nil
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	}
	return -1
}

// MatchSubject reports whether subject matches filter, with NATS's
// wildcards: '*' one token, '>' the rest (one token at least).
func MatchSubject(filter, subject string) bool {
	for {
		ft, frest, fmore := strings.Cut(filter, ".")
		if ft == ">" {
			return subject != ""
		}
		st, srest, smore := strings.Cut(subject, ".")
		if ft != "*" && ft != st {
			return false
		}
		if !fmore || !smore {
			return fmore == smore
		}
		filter, subject = frest, srest
	}
}
