package equivalence

// javaMap is the iteration order of a java.util.concurrent.
// ConcurrentHashMap filled by put from one thread with distinct keys:
// 16 bins at first, twice as many when the count reaches three quarters
// of them; a key goes to the bin of its spread hash, at the bin's end; a
// resize splits each bin into the entries that stay and those that move
// up by the old size, where the run of entries at the bin's end that go
// the same way keeps its order and the entries before it are put in
// front of it one by one (reversing them), as ConcurrentHashMap.transfer
// does. Iteration goes through the bins in order.
type javaMap[V any] struct {
	bins  [][]javaNode[V]
	count int
	limit int
}

type javaNode[V any] struct {
	hash int32
	v    V
}

// spread is ConcurrentHashMap.spread.
func spread(h int32) int32 { return (h ^ int32(uint32(h)>>16)) & 0x7fffffff }

func (m *javaMap[V]) put(keyHash int32, v V) {
	if m.bins == nil {
		m.bins = make([][]javaNode[V], 16)
		m.limit = 12
	}
	h := spread(keyHash)
	i := int(h) & (len(m.bins) - 1)
	m.bins[i] = append(m.bins[i], javaNode[V]{h, v})
	m.count++
	for m.count >= m.limit && len(m.bins) < 1<<30 {
		m.resize()
	}
}

func (m *javaMap[V]) resize() {
	n := len(m.bins)
	next := make([][]javaNode[V], 2*n)
	for i, bin := range m.bins {
		if len(bin) == 0 {
			continue
		}
		// The last run of nodes going the same way keeps its order.
		runBit := int(bin[0].hash) & n
		last := 0
		for k := 1; k < len(bin); k++ {
			if b := int(bin[k].hash) & n; b != runBit {
				runBit, last = b, k
			}
		}
		var lo, hi []javaNode[V]
		if runBit == 0 {
			lo = append(lo, bin[last:]...)
		} else {
			hi = append(hi, bin[last:]...)
		}
		for k := 0; k < last; k++ {
			if int(bin[k].hash)&n == 0 {
				lo = append([]javaNode[V]{bin[k]}, lo...)
			} else {
				hi = append([]javaNode[V]{bin[k]}, hi...)
			}
		}
		next[i], next[i+n] = lo, hi
	}
	m.bins = next
	m.limit = 2*n - n/2 // (n << 1) - (n >>> 1)
}

func (m *javaMap[V]) each(f func(V)) {
	for _, bin := range m.bins {
		for _, nd := range bin {
			f(nd.v)
		}
	}
}
