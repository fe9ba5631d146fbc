package streammsg

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/tracebridge/tracebridge/internal/record"
)

// jsonMessage is the JSON form of a data message (see AppendJSON).
type jsonMessage struct {
	Format       string `json:"format"`
	Run          uint64 `json:"run"`
	Meta         uint64 `json:"meta"`
	Time         int64  `json:"time"`
	Ordinal      uint64 `json:"ordinal"`
	BatchRecords uint32 `json:"batchRecords"`
	Part         uint32 `json:"part"`
	Parts        []struct {
		TypeID uint32 `json:"typeId"`
		Host   string `json:"host"`
	} `json:"parts"`
	SubjectOrdinal uint64 `json:"subjectOrdinal"`
	Lost           uint64 `json:"lost"`
	Origin         struct {
		Receiver string `json:"receiver"`
		Peer     string `json:"peer"`
		Host     string `json:"host"`
		Service  string `json:"service"`
		Session  string `json:"session"`
	} `json:"origin"`
	TypeID    uint32            `json:"typeId"`
	Positions []uint32          `json:"positions"`
	Records   []json.RawMessage `json:"records"`
}

// jsonRecord is one record in `cat --json`'s shape.
type jsonRecord struct {
	Type             string                     `json:"type"`
	LoggingTimestamp json.Number                `json:"loggingTimestamp"`
	Fields           map[string]json.RawMessage `json:"fields"`
}

const jsonFormat = "tracebridge-json/1"

func (m *Message) parseJSON(data []byte) error {
	m.JSON = true
	m.raw = jsonMessage{}
	if err := json.Unmarshal(data, &m.raw); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	j := &m.raw
	if j.Format != jsonFormat {
		return fmt.Errorf("%w: format %q (this decoder reads %s)", ErrMalformed, j.Format, jsonFormat)
	}
	switch {
	case len(j.Parts) == 0 || len(j.Parts) > MaxParts:
		return fmt.Errorf("%w: %d parts", ErrMalformed, len(j.Parts))
	case int(j.Part) >= len(j.Parts):
		return fmt.Errorf("%w: part %d of %d", ErrMalformed, j.Part, len(j.Parts))
	case j.Parts[j.Part].TypeID != j.TypeID:
		return fmt.Errorf("%w: typeId %d, but part %d has %d", ErrMalformed, j.TypeID, j.Part, j.Parts[j.Part].TypeID)
	case len(j.Records) > MaxPartRecords || j.BatchRecords > MaxBatchRecords || len(j.Records) > int(j.BatchRecords):
		return fmt.Errorf("%w: %d records in a batch of %d", ErrMalformed, len(j.Records), j.BatchRecords)
	case len(j.Parts) > 1 && len(j.Positions) != len(j.Records):
		return fmt.Errorf("%w: %d positions for %d records", ErrMalformed, len(j.Positions), len(j.Records))
	}
	m.Run, m.Meta, m.Time, m.Ordinal = j.Run, j.Meta, j.Time, j.Ordinal
	m.BatchRecords, m.Index = j.BatchRecords, j.Part
	for _, p := range j.Parts {
		m.Parts = append(m.Parts, PartRef{TypeID: p.TypeID, Host: p.Host})
	}
	m.SubjectOrdinal, m.Lost = j.SubjectOrdinal, j.Lost
	m.Origin = record.Origin{Receiver: j.Origin.Receiver, Peer: j.Origin.Peer, Host: m.Parts[m.Index].Host,
		Service: j.Origin.Service, Session: j.Origin.Session}
	m.Count = len(j.Records)
	if len(j.Parts) > 1 {
		prev := int64(-1)
		for _, p := range j.Positions {
			if int64(p) <= prev || p >= j.BatchRecords {
				return fmt.Errorf("%w: positions not increasing within the batch", ErrMalformed)
			}
			prev = int64(p)
		}
		m.Positions = append(m.Positions, j.Positions...)
	} else {
		m.Positions = nil
	}
	return nil
}

func (m *Message) jsonRecords(t *record.Type, b *record.Batch) error {
	for i, raw := range m.raw.Records {
		var jr jsonRecord
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&jr); err != nil {
			return fmt.Errorf("%w: record %d: %v", ErrMalformed, i, err)
		}
		if jr.Type != t.Name {
			return fmt.Errorf("%w: record %d has type %s, the part %s", ErrMalformed, i, jr.Type, t.Name)
		}
		ts, err := jr.LoggingTimestamp.Int64()
		if err != nil {
			return fmt.Errorf("%w: record %d: loggingTimestamp %q", ErrMalformed, i, jr.LoggingTimestamp)
		}
		r := b.Add(t, ts)
		for j, f := range t.Fields {
			raw, ok := jr.Fields[f.Name]
			if !ok {
				return fmt.Errorf("%w: record %d: no field %s", ErrMalformed, i, f.Name)
			}
			if f.Array {
				var items []json.RawMessage
				if err := json.Unmarshal(raw, &items); err != nil {
					return fmt.Errorf("%w: record %d: field %s: %v", ErrMalformed, i, f.Name, err)
				}
				if len(items) > MaxArray {
					return fmt.Errorf("%w: record %d: field %s: %d items", ErrMalformed, i, f.Name, len(items))
				}
				v := b.NewList(f.Kind, len(items))
				for k, it := range items {
					x, err := jsonValue(f.Kind, it)
					if err != nil {
						return fmt.Errorf("%w: record %d: field %s[%d]: %v", ErrMalformed, i, f.Name, k, err)
					}
					v.List().Items[k] = x
				}
				r.Values[j] = v
				continue
			}
			v, err := jsonValue(f.Kind, raw)
			if err != nil {
				return fmt.Errorf("%w: record %d: field %s: %v", ErrMalformed, i, f.Name, err)
			}
			r.Values[j] = v
		}
	}
	return nil
}

// jsonValue reads one value of kind k as jsonl writes it.
func jsonValue(k record.Kind, raw json.RawMessage) (record.Value, error) {
	switch k {
	case record.Bool:
		var b bool
		err := json.Unmarshal(raw, &b)
		return record.BoolValue(b), err
	case record.Byte, record.Short, record.Int, record.Long:
		v, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
		return record.IntValue(v), err
	case record.Float, record.Double:
		var f float64
		if len(raw) > 0 && raw[0] == '"' {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return record.Value{}, err
			}
			switch s {
			case "NaN":
				f = math.NaN()
			case "Infinity":
				f = math.Inf(1)
			case "-Infinity":
				f = math.Inf(-1)
			default:
				return record.Value{}, fmt.Errorf("number %q", s)
			}
		} else {
			bits := 64
			if k == record.Float {
				bits = 32
			}
			var err error
			if f, err = strconv.ParseFloat(string(bytes.TrimSpace(raw)), bits); err != nil {
				return record.Value{}, err
			}
		}
		if k == record.Float {
			return record.FloatValue(float32(f)), nil
		}
		return record.DoubleValue(f), nil
	case record.Char:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return record.Value{}, err
		}
		r, n := utf8.DecodeRuneInString(s)
		if n != len(s) || n == 0 {
			return record.Value{}, fmt.Errorf("char %q", s)
		}
		return record.IntValue(int64(uint16(r))), nil
	case record.String:
		if string(bytes.TrimSpace(raw)) == "null" {
			return record.NullString(), nil // JFR's null string, not ""
		}
		var s string
		err := json.Unmarshal(raw, &s)
		return record.StringValue(s), err
	}
	return record.Value{}, fmt.Errorf("kind %v", k)
}
