package trace

// Mix is SplitMix64's finaliser: it spreads ids that differ in a few bits
// (consecutive trace ids, an id and an orderIndex) over all 64, for the ids
// derived from them and for sampling by trace id.
func Mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
