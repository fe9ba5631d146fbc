package kieker

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/tracebridge/tracebridge/internal/javanum"
)

// DefaultMaxLineLen is the default limit on the length of a kieker.map or
// .dat line.
const DefaultMaxLineLen = 4 << 20

// ReadMap reads a kieker.map (lines $<id>=<string>) into s. It reads the
// maps of every Kieker version:
//
//   - lines split at the first '=', the '$' is optional, empty lines are
//     skipped, a CR before the LF is dropped, a UTF-8 byte-order mark at the
//     start is skipped;
//   - values are unescaped as Kieker 2.0's reader (TextMapDeserializer, via
//     FSUtil.decodeNewline) and Kieker ≤1.12's readers do: \\ is a
//     backslash, \r a CR, \n a LF, a backslash before any other character
//     stays as it is (a backslash at the very end too, where Java fails).
//
// Kieker ≤1.12 escaped \, CR and LF in this way; Kieker 1.13 to 2.0 write
// values raw. The two disagree for a raw value holding \\, \r or \n (a
// Windows path, say): such a value is read as Kieker 2.0's own reader reads
// it, which is what we prefer where versions conflict.
//
// Errors name the line and the reason: no '=', an id that is not an int32,
// an id registered twice with different strings, a line longer than
// maxLineLen bytes (DefaultMaxLineLen when 0), the table's entry limit.
// Entries read before an error stay in s.
func ReadMap(r io.Reader, s *Strings, maxLineLen int) error {
	if maxLineLen <= 0 {
		maxLineLen = DefaultMaxLineLen
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte
	var tmp []byte
	for lineNo := 1; ; lineNo++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				if len(long) > maxLineLen+1 {
					return lineError(lineNo, fmt.Sprintf("longer than the limit %d bytes", maxLineLen), ErrLimit)
				}
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("line %d: %w", lineNo, err)
		}
		if len(line) > 0 {
			line = bytes.TrimSuffix(line, []byte{'\n'})
			line = bytes.TrimSuffix(line, []byte{'\r'})
			if lineNo == 1 {
				line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
			}
			if len(line) > maxLineLen {
				return lineError(lineNo, fmt.Sprintf("longer than the limit %d bytes", maxLineLen), ErrLimit)
			}
			if len(line) > 0 {
				var perr error
				tmp, perr = mapLine(line, lineNo, s, tmp)
				if perr != nil {
					return perr
				}
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

// mapLine registers one non-empty map line; tmp is scratch space.
func mapLine(line []byte, lineNo int, s *Strings, tmp []byte) ([]byte, error) {
	eq := bytes.IndexByte(line, '=')
	if eq < 0 {
		return tmp, lineError(lineNo, fmt.Sprintf("no '=' in %q", clip(string(line))), ErrMalformed)
	}
	key := line[:eq]
	if len(key) > 0 && key[0] == '$' {
		key = key[1:]
	}
	id, ok := javanum.ParseInt(key, 32)
	if !ok {
		return tmp, lineError(lineNo, fmt.Sprintf("id %q is not a number", clip(string(line[:eq]))), ErrMalformed)
	}
	tmp = unescapeMap(tmp[:0], line[eq+1:])
	if err := s.Set(int32(id), string(tmp)); err != nil {
		e := lineError(lineNo, err.Error(), ErrMalformed)
		if isErr(err, ErrLimit) {
			e.kinds = []error{ErrLimit}
		} else {
			e.kinds = []error{ErrConflict, ErrMalformed}
		}
		return tmp, e
	}
	return tmp, nil
}

// unescapeMap appends v with Kieker's map escapes (\\, \r, \n) resolved.
func unescapeMap(dst, v []byte) []byte {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '\\' || i+1 == len(v) {
			dst = append(dst, c)
			continue
		}
		i++
		switch v[i] {
		case '\\':
			dst = append(dst, '\\')
		case 'r':
			dst = append(dst, '\r')
		case 'n':
			dst = append(dst, '\n')
		default:
			dst = append(dst, '\\', v[i])
		}
	}
	return dst
}

// AppendMapEntry appends the kieker.map line "$<id>=<s>\n" with backslash,
// CR and LF escaped as \\, \r and \n, which Kieker 2.0's reader (and ReadMap)
// read back as s.
func AppendMapEntry(dst []byte, id int32, s string) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(id), 10)
	dst = append(dst, '=')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\n':
			dst = append(dst, '\\', 'n')
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '\n')
}
