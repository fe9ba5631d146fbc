package javanum

import (
	"math"
	"strconv"
	"testing"
)

// What Java ≥ 19 prints (Double.toString / Float.toString).
func TestAppendDouble(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{math.NaN(), "NaN"},
		{math.Float64frombits(0xfff8000000000123), "NaN"},
		{math.Inf(1), "Infinity"},
		{math.Inf(-1), "-Infinity"},
		{1, "1.0"},
		{-1, "-1.0"},
		{100, "100.0"},
		{0.062, "0.062"},
		{0.124, "0.124"},
		{2472576, "2472576.0"},
		{16384, "16384.0"},
		{35.5, "35.5"},
		{0.05, "0.05"},
		{0.1, "0.1"},
		{0.001, "0.001"},
		{0.0009, "9.0E-4"},
		{1e-4, "1.0E-4"},
		{1.0e7, "1.0E7"},
		{9999999, "9999999.0"},
		{9999999.999, "9999999.999"},
		{12345678.9, "1.23456789E7"},
		{123456789, "1.23456789E8"},
		{1.0 / 3, "0.3333333333333333"},
		{2.0 / 3, "0.6666666666666666"},
		{100.0 / 3, "33.333333333333336"},
		{4.35, "4.35"},
		{1e23, "1.0E23"},
		{2e23, "2.0E23"},
		{math.MaxFloat64, "1.7976931348623157E308"},
		{-math.MaxFloat64, "-1.7976931348623157E308"},
		{math.SmallestNonzeroFloat64, "4.9E-324"},
		{-math.SmallestNonzeroFloat64, "-4.9E-324"},
		{2 * math.SmallestNonzeroFloat64, "9.9E-324"}, // Java takes the closest of 1 or 2 digits
		{0x1p-1022, "2.2250738585072014E-308"},
		{1e21, "1.0E21"},
		{1.5e-10, "1.5E-10"},
		{123.456, "123.456"},
		{-0.5, "-0.5"},
		{1e100, "1.0E100"},
		{9007199254740993, "9.007199254740992E15"},
		{0.3, "0.3"},
		{1.1, "1.1"},
		{5e-324 * 3, "1.5E-323"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := string(AppendDouble([]byte("x"), tt.v)); got != "x"+tt.want {
				t.Errorf("AppendDouble(%v) = %q, want %q", tt.v, got[1:], tt.want)
			}
			if math.IsNaN(tt.v) {
				return
			}
			back, ok := ParseFloat([]byte(tt.want), 64)
			if !ok || math.Float64bits(back) != math.Float64bits(tt.v) {
				t.Errorf("parse(%q) = %v, %v", tt.want, back, ok)
			}
		})
	}
}

func TestAppendFloat(t *testing.T) {
	tests := []struct {
		v    float32
		want string
	}{
		{0, "0.0"},
		{float32(math.Copysign(0, -1)), "-0.0"},
		{float32(math.NaN()), "NaN"},
		{float32(math.Inf(1)), "Infinity"},
		{float32(math.Inf(-1)), "-Infinity"},
		{1, "1.0"},
		{0.1, "0.1"},
		{0.3, "0.3"},
		{3.14, "3.14"},
		{1.1, "1.1"},
		{100, "100.0"},
		{1e7, "1.0E7"},
		{9999999, "9999999.0"},
		{16777216, "1.6777216E7"},
		{1e10, "1.0E10"},
		{1e-3, "0.001"},
		{1e-4, "1.0E-4"},
		{math.MaxFloat32, "3.4028235E38"},
		{math.SmallestNonzeroFloat32, "1.4E-45"},
		{-math.SmallestNonzeroFloat32, "-1.4E-45"},
		{0x1p-126, "1.1754944E-38"}, // Java < 19 printed 1.17549435E-38
		{1.0 / 3, "0.33333334"},
		{123456.79, "123456.79"},
		{33554432, "3.3554432E7"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := string(AppendFloat(nil, tt.v)); got != tt.want {
				t.Errorf("AppendFloat(%v) = %q, want %q", tt.v, got, tt.want)
			}
			if tt.v != tt.v {
				return
			}
			back, ok := ParseFloat([]byte(tt.want), 32)
			if !ok || math.Float32bits(float32(back)) != math.Float32bits(tt.v) {
				t.Errorf("parse(%q) = %v, %v", tt.want, back, ok)
			}
		})
	}
}

// TestJavaFormatRoundTrip: every formatted double and float parses back to
// itself, and the digits are never longer than Go's shortest.
func TestJavaFormatRoundTrip(t *testing.T) {
	seed := uint64(0x9e3779b97f4a7c15)
	for i := 0; i < 200000; i++ {
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		d := math.Float64frombits(seed)
		f := math.Float32frombits(uint32(seed >> 17))
		if d == d && !math.IsInf(d, 0) {
			s := AppendDouble(nil, d)
			if back, err := strconv.ParseFloat(string(s), 64); err != nil || back != d {
				t.Fatalf("%v (%x) → %s → %v %v", d, seed, s, back, err)
			}
		}
		if f == f && !math.IsInf(float64(f), 0) {
			s := AppendFloat(nil, f)
			if back, err := strconv.ParseFloat(string(s), 32); err != nil || float32(back) != f {
				t.Fatalf("%v → %s → %v %v", f, s, back, err)
			}
		}
	}
}

func TestParseJavaNumbers(t *testing.T) {
	ints := []struct {
		in   string
		bits uint
		want int64
		ok   bool
	}{
		{"0", 64, 0, true},
		{"+5", 64, 5, true},
		{"-5", 32, -5, true},
		{"9223372036854775807", 64, math.MaxInt64, true},
		{"-9223372036854775808", 64, math.MinInt64, true},
		{"9223372036854775808", 64, 0, false},
		{"-9223372036854775809", 64, 0, false},
		{"99999999999999999999999", 64, 0, false},
		{"2147483647", 32, math.MaxInt32, true},
		{"2147483648", 32, 0, false},
		{"-2147483648", 32, math.MinInt32, true},
		{"127", 8, 127, true},
		{"128", 8, 0, false},
		{"-128", 8, -128, true},
		{"32767", 16, 32767, true},
		{"-32769", 16, 0, false},
		{"", 64, 0, false},
		{"+", 64, 0, false},
		{"-", 64, 0, false},
		{"1 ", 64, 0, false},
		{" 1", 64, 0, false},
		{"0x10", 64, 0, false},
		{"1e3", 64, 0, false},
		{"00012", 64, 12, true},
	}
	for _, tt := range ints {
		got, ok := ParseInt([]byte(tt.in), tt.bits)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseInt(%q, %d) = %d, %v; want %d, %v", tt.in, tt.bits, got, ok, tt.want, tt.ok)
		}
	}
	floats := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"1", 1, true},
		{"+1.5", 1.5, true},
		{"-1.5e3", -1500, true},
		{"1.5E+3", 1500, true},
		{"1.5e-3", 0.0015, true},
		{".5", 0.5, true},
		{"5.", 5, true},
		{"1d", 1, true},
		{"1.0D", 1, true},
		{"2.5f", 2.5, true},
		{"2.5F", 2.5, true},
		{" 7.0 ", 7, true},
		{"\t7\n", 7, true},
		{"Infinity", math.Inf(1), true},
		{"-Infinity", math.Inf(-1), true},
		{"+Infinity", math.Inf(1), true},
		{"1e400", math.Inf(1), true},
		{"-1e400", math.Inf(-1), true},
		{"1e-400", 0, true},
		{"0x1p3", 8, true},
		{"0X1.8P1", 3, true},
		{"0x10", 0, false},
		{"inf", 0, false},
		{"infinity", 0, false},
		{"nan", 0, false},
		{"", 0, false},
		{".", 0, false},
		{"e5", 0, false},
		{"1e", 0, false},
		{"1e+", 0, false},
		{"1_000", 0, false},
		{"1.2.3", 0, false},
		{"--1", 0, false},
		{"1dd", 0, false},
		{"d", 0, false},
		{"0x", 0, false},
		{"0xp1", 0, false},
	}
	for _, tt := range floats {
		got, ok := ParseFloat([]byte(tt.in), 64)
		if ok != tt.ok || ok && got != tt.want {
			t.Errorf("ParseFloat(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	for _, in := range []string{"NaN", "-NaN", "+NaN", " NaN "} {
		if v, ok := ParseFloat([]byte(in), 64); !ok || v == v {
			t.Errorf("ParseFloat(%q) = %v, %v", in, v, ok)
		}
	}
	if v, ok := ParseFloat([]byte("3.4028236E38"), 32); !ok || !math.IsInf(v, 1) {
		t.Errorf("float overflow: %v %v", v, ok)
	}
}

func TestParseEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		in   string
		bits int
		want int64
		ok   bool
	}{
		{"0", 32, 0, true}, {"+7", 8, 7, true}, {"-128", 8, -128, true}, {"128", 8, 0, false}, {"-129", 8, 0, false},
		{"32767", 16, 32767, true}, {"-32768", 16, -32768, true}, {"2147483647", 32, math.MaxInt32, true},
		{"-9223372036854775808", 64, math.MinInt64, true}, {"9223372036854775808", 64, 0, false},
		{"99999999999999999999999", 64, 0, false}, {"000000000000000000000012", 64, 12, true},
		{"", 32, 0, false}, {"-", 32, 0, false}, {"+", 32, 0, false}, {"1 ", 32, 0, false}, {"0x10", 32, 0, false}, {"1_000", 32, 0, false}, {"--1", 32, 0, false},
	} {
		if got, ok := ParseInt([]byte(tc.in), uint(tc.bits)); got != tc.want || ok != tc.ok {
			t.Errorf("ParseInt(%q, %d) = %d, %v; want %d, %v", tc.in, tc.bits, got, ok, tc.want, tc.ok)
		}
	}
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"1.0E-4", 1e-4, true}, {"1e+06", 1e6, true}, {"-Infinity", math.Inf(-1), true}, {"+Infinity", math.Inf(1), true},
		{"1e400", math.Inf(1), true}, {"-1e400", math.Inf(-1), true}, {"1e-400", 0, true}, {"\t3\n", 3, true}, {"2D", 2, true},
		{"0x1p-2", 0.25, true}, {"0x1p1d", 2, true}, {"0X1.8P1", 3, true},
		{"inf", 0, false}, {"Inf", 0, false}, {"nan", 0, false}, {"infinity", 0, false}, {"", 0, false}, {"d", 0, false},
		{"0x10", 0, false}, {"1e", 0, false}, {"1.5.5", 0, false}, {"0x1_0p0", 0, false},
	} {
		if got, ok := ParseFloat([]byte(tc.in), 64); got != tc.want || ok != tc.ok {
			t.Errorf("ParseFloat(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	if f, ok := ParseFloat([]byte("-NaN"), 64); !ok || !math.IsNaN(f) {
		t.Error("-NaN")
	}
}
