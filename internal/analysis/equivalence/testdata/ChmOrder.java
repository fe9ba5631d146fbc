// Writes chm-order.txt: for each case, the hashes put (in order) into a
// java.util.concurrent.ConcurrentHashMap and the order its iteration
// returns them in (indexes into the puts). Run: java ChmOrder.java
import java.io.PrintWriter;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;

public class ChmOrder {
	static final class K {
		final int h, i;
		K(int h, int i) { this.h = h; this.i = i; }
		@Override public int hashCode() { return h; }
		@Override public boolean equals(Object o) { return this == o; }
	}

	public static void main(String[] args) throws Exception {
		Random r = new Random(26);
		try (PrintWriter w = new PrintWriter("chm-order.txt")) {
			for (int c = 0; c < 300; c++) {
				int n = 1 + r.nextInt(c < 200 ? 400 : 120);
				int[] hs = new int[n];
				for (int i = 0; i < n; i++) {
					if (c < 100) {
						hs[i] = r.nextInt(); // any hash
					} else if (c < 200) {
						hs[i] = (int) (r.nextLong() ^ (r.nextLong() >>> 32)); // Long.hashCode of trace ids
					} else {
						hs[i] = r.nextInt(16) + 16 * r.nextInt(8); // many in a bin, never more than 8
					}
				}
				if (c >= 200) { // at most 8 entries with the same low 4 bits
					int[] per = new int[16];
					int m = 0;
					for (int i = 0; i < n; i++) {
						if (per[hs[i] & 15]++ < 8) hs[m++] = hs[i];
					}
					n = m;
				}
				ConcurrentHashMap<K, Integer> map = new ConcurrentHashMap<>();
				StringBuilder b = new StringBuilder();
				for (int i = 0; i < n; i++) {
					map.put(new K(hs[i], i), i);
					b.append(i == 0 ? "" : " ").append(hs[i]);
				}
				w.println(b);
				b.setLength(0);
				for (K k : map.keySet()) {
					b.append(b.length() == 0 ? "" : " ").append(k.i);
				}
				w.println(b);
			}
		}
	}
}
