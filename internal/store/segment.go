package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Segment files: a 24-byte header, then blocks.
//
//	segment header: "TBSG" | version u32 (1) | host id u32 | segment u32 | created unix ns i64
//	block header:   "TBK3" | compressed length u32 | raw length u32 | traces u32 |
//	                min start i64 | max end i64 | CRC-32C u32 of the first 32 bytes and the payload
//	block payload:  S2 block (github.com/klauspost/compress/s2) of: first symbol id (uvarint),
//	                symbol count (uvarint), the new symbols (uvarint length + bytes each),
//	                then the traces (uvarint length + trace body each)
//
// A "TBK3" block's payload is compressed with S2 (write-ahead chunks:
// 3–4 times less CPU than zstd's fastest level, 10–15 % more bytes; the
// block a head becomes compresses its pages again with zstd); a "TBK2"
// block's is one zstd frame, as every block written before. "TBK2" and
// "TBK3" blocks' trace bodies begin with their version byte (see
// bodyVersion); a "TBK1" block (zstd), written before version 2, holds
// bodies of version 1 without it.
//
// All integers big-endian. A block is written whole and the file synced
// before the index points at it; a block whose header or checksum does not
// hold at the end of the last segment is the torn tail of a crash.
const (
	segMagic        = "TBSG"
	blockMagic      = "TBK3" // S2
	blockMagicV2    = "TBK2" // zstd
	blockMagicV1    = "TBK1" // zstd, bodies of version 1 without a version byte
	segHeaderSize   = 24
	blockHeaderSize = 36
	segVersion      = 1
	// maxBlockSize bounds a block's compressed and raw size (a corrupt
	// length must not make the reader allocate gigabytes).
	maxBlockSize = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errTorn says a block is incomplete or fails its checksum.
var errTorn = errors.New("incomplete or corrupt block")

type blockHeader struct {
	compLen, rawLen, count uint32
	minStart, maxEnd       int64
	// version is 1 for a TBK1 block (bodies of version 1 without a
	// version byte), 2 for a TBK2 or TBK3 block (bodies with theirs).
	version byte
	// s2: the payload is an S2 block (TBK3), not a zstd frame.
	s2 bool
}

var (
	zencOnce sync.Once
	zenc     *zstd.Encoder
	zdecPool = sync.Pool{New: func() any {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxBlockSize))
		if err != nil {
			panic(err)
		}
		return d
	}}
)

// encoder1 compresses a write-ahead chunk too large for S2 as zstd
// (TBK2), at its fastest level.
func encoder1() *zstd.Encoder {
	zencOnce.Do(func() {
		var err error
		zenc, err = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest))
		if err != nil {
			panic(err)
		}
	})
	return zenc
}

// appendBlock appends a block holding raw (the uncompressed payload) to
// dst: a TBK3 block (S2). The write-ahead chunks live until their head
// is cut into a block, which compresses its pages again, harder: they
// are compressed at the cheapest (zstd's fastest level took 10–12 % of
// serve's CPU at OTLP ingest, S2 takes a quarter of that).
func appendBlock(dst, raw []byte, h blockHeader) []byte {
	start := len(dst)
	if n := s2.MaxEncodedLen(len(raw)); n >= 0 {
		dst = slices.Grow(dst, blockHeaderSize+n)
		dst = append(dst, blockMagic...)
		dst = append(dst, make([]byte, blockHeaderSize-4)...)
		enc := s2.Encode(dst[len(dst):len(dst)+n], raw)
		dst = dst[:len(dst)+len(enc)]
	} else {
		dst = append(dst, blockMagicV2...)
		dst = append(dst, make([]byte, blockHeaderSize-4)...)
		dst = encoder1().EncodeAll(raw, dst)
	}
	return sealBlock(dst, start, len(raw), h)
}

// sealBlock fills in the header of the block at dst[start:] (its magic
// written, its payload raw bytes long compressed behind it).
func sealBlock(dst []byte, start, raw int, h blockHeader) []byte {
	hdr := dst[start:]
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(dst)-start-blockHeaderSize))
	binary.BigEndian.PutUint32(hdr[8:], uint32(raw))
	binary.BigEndian.PutUint32(hdr[12:], h.count)
	binary.BigEndian.PutUint64(hdr[16:], uint64(h.minStart))
	binary.BigEndian.PutUint64(hdr[24:], uint64(h.maxEnd))
	c := crc32.Update(0, castagnoli, hdr[:32])
	c = crc32.Update(c, castagnoli, hdr[blockHeaderSize:])
	binary.BigEndian.PutUint32(hdr[32:], c)
	return dst
}

// parseBlockHeader checks a block header's magic and sizes.
func parseBlockHeader(p []byte) (blockHeader, error) {
	if len(p) < blockHeaderSize || string(p[:4]) != blockMagic && string(p[:4]) != blockMagicV2 && string(p[:4]) != blockMagicV1 {
		return blockHeader{}, fmt.Errorf("%w: bad block header", errTorn)
	}
	h := blockHeader{
		version:  2,
		compLen:  binary.BigEndian.Uint32(p[4:]),
		rawLen:   binary.BigEndian.Uint32(p[8:]),
		count:    binary.BigEndian.Uint32(p[12:]),
		minStart: int64(binary.BigEndian.Uint64(p[16:])),
		maxEnd:   int64(binary.BigEndian.Uint64(p[24:])),
	}
	switch string(p[:4]) {
	case blockMagicV1:
		h.version = 1
	case blockMagic:
		h.s2 = true
	}
	if h.compLen > maxBlockSize || h.rawLen > maxBlockSize {
		return blockHeader{}, fmt.Errorf("%w: block size %d/%d over the limit", errTorn, h.compLen, h.rawLen)
	}
	return h, nil
}

// readBlock reads and checks the block at off of f and returns its header
// and decompressed payload.
func readBlock(f io.ReaderAt, off int64) (blockHeader, []byte, error) {
	return readBlockInto(f, off, nil)
}

// blockBuf is the room a reader of many blocks reads them into: the
// compressed and the decompressed bytes of one block at a time.
type blockBuf struct{ comp, raw []byte }

// readBlockInto is readBlock reading into buf's room when buf is not nil
// (the payload returned is good until the next read into buf).
func readBlockInto(f io.ReaderAt, off int64, buf *blockBuf) (blockHeader, []byte, error) {
	var hb [blockHeaderSize]byte
	if _, err := f.ReadAt(hb[:], off); err != nil {
		return blockHeader{}, nil, fmt.Errorf("%w: header: %v", errTorn, err)
	}
	h, err := parseBlockHeader(hb[:])
	if err != nil {
		return h, nil, err
	}
	var comp, room []byte
	if buf != nil {
		buf.comp = slices.Grow(buf.comp[:0], int(h.compLen))
		buf.raw = slices.Grow(buf.raw[:0], int(h.rawLen))
		comp, room = buf.comp[:h.compLen], buf.raw[:0]
	} else {
		comp, room = make([]byte, h.compLen), make([]byte, 0, h.rawLen)
	}
	if _, err := f.ReadAt(comp, off+blockHeaderSize); err != nil {
		return h, nil, fmt.Errorf("%w: payload: %v", errTorn, err)
	}
	c := crc32.Update(0, castagnoli, hb[:32])
	c = crc32.Update(c, castagnoli, comp)
	if c != binary.BigEndian.Uint32(hb[32:]) {
		return h, nil, fmt.Errorf("%w: checksum mismatch", errTorn)
	}
	var raw []byte
	if h.s2 {
		if n, err := s2.DecodedLen(comp); err != nil || n != int(h.rawLen) {
			return h, nil, fmt.Errorf("%w: decompressing: %d bytes, want %d (%v)", errTorn, n, h.rawLen, err)
		}
		raw, err = s2.Decode(room[:h.rawLen], comp)
	} else {
		d := zdecPool.Get().(*zstd.Decoder)
		raw, err = d.DecodeAll(comp, room)
		zdecPool.Put(d)
	}
	if err != nil || len(raw) != int(h.rawLen) {
		return h, nil, fmt.Errorf("%w: decompressing: %v", errTorn, err)
	}
	return h, raw, nil
}

// blockSize returns the size on disk of a block with header h.
func blockSize(h blockHeader) int64 { return blockHeaderSize + int64(h.compLen) }

// payload splits a block's raw payload into its new symbols and traces.
type payload struct {
	firstSym uint64
	syms     []string
	traces   [][]byte
}

func appendPayload(dst []byte, firstSym uint64, syms []string, traces [][]byte) []byte {
	dst = appendPayloadHead(dst, firstSym, syms, len(traces))
	for _, t := range traces {
		dst = appendBytes(dst, t)
	}
	return dst
}

// appendPayloadHead appends what a payload holds before its n traces
// (each then appended by appendBytes).
func appendPayloadHead(dst []byte, firstSym uint64, syms []string, n int) []byte {
	dst = binary.AppendUvarint(dst, firstSym)
	dst = binary.AppendUvarint(dst, uint64(len(syms)))
	for _, s := range syms {
		dst = appendString(dst, s)
	}
	return binary.AppendUvarint(dst, uint64(n))
}

// appendBytes appends p with its length before it.
func appendBytes(dst, p []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(p)))
	return append(dst, p...)
}

// parsePayload splits the raw payload of a block of version (its
// header's). The bodies of a version 1 block are copied behind the version
// byte they lack, so that every body says its version.
func parsePayload(raw []byte, version byte) (payload, error) {
	d := &decoder{p: raw}
	var p payload
	p.firstSym = d.uvarint()
	n := d.count(maxListLen, "symbol")
	for range n {
		p.syms = append(p.syms, d.str())
	}
	nt := d.count(maxListLen, "trace")
	for range nt {
		l := d.uvarint()
		if d.err != nil || l > uint64(len(raw)-d.off) {
			d.fail("trace length")
			break
		}
		p.traces = append(p.traces, raw[d.off:d.off+int(l)])
		d.off += int(l)
	}
	if d.err == nil && d.off != len(raw) {
		d.fail("trailing bytes")
	}
	if d.err == nil && version == 1 {
		n := len(p.traces)
		for _, t := range p.traces {
			n += len(t)
		}
		buf := make([]byte, 0, n)
		for i, t := range p.traces {
			buf = append(buf, 1)
			buf = append(buf, t...)
			p.traces[i] = buf[len(buf)-len(t)-1 : len(buf) : len(buf)]
		}
	}
	return p, d.err
}

// segHeader is a segment file's header.
type segHeader struct {
	host, seg uint32
	created   int64
}

func appendSegHeader(dst []byte, h segHeader) []byte {
	dst = append(dst, segMagic...)
	dst = binary.BigEndian.AppendUint32(dst, segVersion)
	dst = binary.BigEndian.AppendUint32(dst, h.host)
	dst = binary.BigEndian.AppendUint32(dst, h.seg)
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.created))
	return dst
}

// scanBlocks reads the blocks of a segment from off on, calling f with each
// block's offset, header and raw payload. It stops at the end of the file
// and returns the offset after the last good block with the error that
// ended the scan (errTorn for a bad block; nil at a clean end).
func scanBlocks(f *os.File, off int64, fn func(off int64, h blockHeader, raw []byte) error) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return off, err
	}
	size := st.Size()
	for off < size {
		h, raw, err := readBlock(f, off)
		if err != nil {
			return off, err
		}
		if err := fn(off, h, raw); err != nil {
			return off, err
		}
		off += blockSize(h)
	}
	return off, nil
}
