package fressian

// Fressian codes (Java's org.fressian.impl.Codes).
const (
	codePriorityCachePacked = 0x80 // 0x80–0x9F: priority cache index 0..31
	codeStructCachePacked   = 0xA0 // 0xA0–0xAF: struct cache index 0..15
	codeLongArray           = 0xB0
	codeDoubleArray         = 0xB1
	codeBooleanArray        = 0xB2
	codeIntArray            = 0xB3
	codeFloatArray          = 0xB4
	codeObjectArray         = 0xB5
	codeMap                 = 0xC0
	codeSet                 = 0xC1
	codeUUID                = 0xC3
	codeRegex               = 0xC4
	codeURI                 = 0xC5
	codeBigInt              = 0xC6
	codeBigDec              = 0xC7
	codeInst                = 0xC8
	codeSym                 = 0xC9
	codeKey                 = 0xCA
	codeGetPriorityCache    = 0xCC
	codePutPriorityCache    = 0xCD
	codeFooter              = 0xCF
	codeBytesPacked         = 0xD0 // 0xD0–0xD7: 0..7 bytes follow
	codeBytesChunk          = 0xD8
	codeBytes               = 0xD9
	codeStringPacked        = 0xDA // 0xDA–0xE1: 0..7 bytes follow
	codeStringChunk         = 0xE2
	codeString              = 0xE3
	codeListPacked          = 0xE4 // 0xE4–0xEB: 0..7 items follow
	codeList                = 0xEC
	codeBeginClosedList     = 0xED
	codeBeginOpenList       = 0xEE
	codeStructType          = 0xEF
	codeStruct              = 0xF0
	codeTrue                = 0xF5
	codeFalse               = 0xF6
	codeNull                = 0xF7
	codeInt                 = 0xF8
	codeFloat               = 0xF9
	codeDouble              = 0xFA
	codeDouble0             = 0xFB
	codeDouble1             = 0xFC
	codeEndCollection       = 0xFD
	codeResetCaches         = 0xFE

	footerMagic = 0xCFCFCFCF

	stringChunkSize = 65536 // Java's string buffer: the largest piece
	bytesChunkSize  = 65535 // Java's Ranges.BYTE_CHUNK_SIZE
)

// Kind is the type of a Fressian value.
type Kind uint8

// The kinds of values.
const (
	KindInvalid Kind = iota // not a value: an undefined code, or after an error
	KindNull
	KindBool
	KindInt
	KindFloat  // 32-bit IEEE (Java float)
	KindDouble // 64-bit IEEE (Java double)
	KindString
	KindBytes
	KindList
	KindMap    // items k0, v0, k1, v1, …
	KindSet    // items
	KindStruct // a tagged value: user structs and the built-in tags uuid, regex, uri, bigint, bigdec, inst, sym, key
	KindArray  // a typed array: int[], long[], float[], double[], boolean[], Object[]
)

var kindNames = [...]string{
	KindInvalid: "invalid", KindNull: "null", KindBool: "bool", KindInt: "int",
	KindFloat: "float", KindDouble: "double", KindString: "string", KindBytes: "bytes",
	KindList: "list", KindMap: "map", KindSet: "set", KindStruct: "struct", KindArray: "array",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + itoa(int(k)) + ")"
}

// kinds maps a value's first code to its kind. Prefix codes (cache
// references and puts, RESET_CACHES, footers) are resolved before it is
// consulted, and read as KindInvalid here.
var kinds = func() (t [256]Kind) {
	for c := 0x00; c <= 0x7F; c++ {
		t[c] = KindInt
	}
	t[0xFF], t[codeInt] = KindInt, KindInt
	for c := codeStructCachePacked; c < codeStructCachePacked+16; c++ {
		t[c] = KindStruct
	}
	for c := codeLongArray; c <= codeObjectArray; c++ {
		t[c] = KindArray
	}
	t[codeMap], t[codeSet] = KindMap, KindSet
	for c := codeUUID; c <= codeKey; c++ {
		t[c] = KindStruct
	}
	for c := codeBytesPacked; c <= codeBytes; c++ {
		t[c] = KindBytes
	}
	for c := codeStringPacked; c <= codeString; c++ {
		t[c] = KindString
	}
	for c := codeListPacked; c <= codeBeginOpenList; c++ {
		t[c] = KindList
	}
	t[codeStructType], t[codeStruct] = KindStruct, KindStruct
	t[codeTrue], t[codeFalse], t[codeNull] = KindBool, KindBool, KindNull
	t[codeFloat] = KindFloat
	t[codeDouble], t[codeDouble0], t[codeDouble1] = KindDouble, KindDouble, KindDouble
	return t
}()

// builtin describes the tags Fressian gives codes of their own: their
// name and how many values follow the code.
type builtin struct {
	tag    string
	fields int
}

// builtins is indexed by the code.
var builtins = [256]builtin{
	codeUUID: {"uuid", 1}, codeRegex: {"regex", 1}, codeURI: {"uri", 1},
	codeBigInt: {"bigint", 1}, codeBigDec: {"bigdec", 2}, codeInst: {"inst", 1},
	codeSym: {"sym", 2}, codeKey: {"key", 2},
}

var builtinCodes = map[string]byte{
	"uuid": codeUUID, "regex": codeRegex, "uri": codeURI, "bigint": codeBigInt,
	"bigdec": codeBigDec, "inst": codeInst, "sym": codeSym, "key": codeKey,
}

// arrayTags is indexed by the code.
var arrayTags = [256]string{
	codeLongArray:    "long[]",
	codeDoubleArray:  "double[]",
	codeBooleanArray: "boolean[]",
	codeIntArray:     "int[]",
	codeFloatArray:   "float[]",
	codeObjectArray:  "Object[]",
}

func arrayCode(tag string) (byte, bool) {
	for i, t := range arrayTags {
		if t != "" && t == tag {
			return byte(i), true
		}
	}
	return 0, false
}
