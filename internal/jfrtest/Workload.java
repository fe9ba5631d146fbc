// Workload is the Java program the JFR tests and the benchmark record: it
// allocates, sleeps, contends on monitors, throws, does file and socket
// I/O (a loopback echo) and emits
// custom jdk.jfr.Event subclasses, for a given number of seconds.
//
// Usage: java Workload SECONDS [RUN_ID [SCALE]]
//
// SCALE multiplies the number of worker threads (1 for tests, more for the
// benchmark's large recording), and the exceptions thrown and orders placed
// between pauses of a millisecond. Every second it prints
// "tick N" on standard output; "ready" once the workers run. With
// -Dworkload.untilFinish=true it also ends, normally, when its standard
// input ends (the tests' JVM.Finish), so a test need not guess how long a
// loaded machine takes to read its events.

import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.Recording;
import jdk.jfr.StackTrace;
import jdk.jfr.Timespan;
import jdk.jfr.Timestamp;
import jdk.jfr.Unsigned;

public class Workload {
    @Name("shop.Order")
    @Label("Order")
    @Category({"Shop", "Orders"})
    @Description("An order placed in the shop")
    static class Order extends Event {
        @Label("Order Id") String id;
        @Label("Customer") String customer;
        int quantity;
        long amountCents;
        double price;
        float discount;
        boolean express;
        char grade;
        byte priority;
        short region;
        @Label("Item Class") Class<?> itemClass;
        @Label("Handler") Thread handler;
        @Timespan(Timespan.MILLISECONDS) long processing;
        @Timestamp(Timestamp.MILLISECONDS_SINCE_EPOCH) long placedAt;
        @DataAmount long bytes;
        @Unsigned int flags;
        long seq;
        String run;
    }

    @Name("shop.Checkout")
    @Label("Checkout")
    @Category("Shop")
    static class Checkout extends Event {
        String cart;
        int items;
        @Timespan(Timespan.NANOSECONDS) long waited;
    }

    @Name("shop.Tick")
    @Label("Tick")
    @StackTrace(false)
    static class Tick extends Event {
        long seq;
        String run;
        @Timestamp(Timestamp.MILLISECONDS_SINCE_EPOCH) long wallMillis;
    }

    static final Object LOCK = new Object();
    static final AtomicLong SEQ = new AtomicLong();
    static volatile boolean running = true;
    static volatile Object sink;
    static String runId = "run";
    static int THROWS_PER_PAUSE = 1; // and orders per pause

    static class Item {}
    static class Gadget {}

    public static void main(String[] args) throws Exception {
        int seconds = args.length > 0 ? Integer.parseInt(args[0]) : 5;
        runId = args.length > 1 ? args[1] : "run";
        int scale = args.length > 2 ? Integer.parseInt(args[2]) : 1;
        THROWS_PER_PAUSE = scale;
        List<Thread> workers = new ArrayList<>();
        for (int i = 0; i < scale; i++) {
            final int n = i;
            workers.add(new Thread(() -> allocate(n), "allocator-" + i));
            workers.add(new Thread(Workload::sleeper, "sleeper-" + i));
            workers.add(new Thread(Workload::contend, "contender-a-" + i));
            workers.add(new Thread(Workload::contend, "contender-b-" + i));
            workers.add(new Thread(Workload::thrower, "thrower-" + i));
            workers.add(new Thread(Workload::fileIO, "io-" + i));
            workers.add(new Thread(Workload::socketIO, "net-" + i));
            workers.add(new Thread(Workload::orders, "shop-é-" + i));
        }
        for (Thread t : workers) {
            t.setDaemon(true);
            t.start();
        }
        CountDownLatch stop = new CountDownLatch(1);
        if (Boolean.getBoolean("workload.untilFinish")) {
            Thread stdin = new Thread(() -> {
                try {
                    while (System.in.read() >= 0) {
                    }
                } catch (IOException e) {
                }
                stop.countDown();
            }, "stdin");
            stdin.setDaemon(true);
            stdin.start();
        }
        System.out.println("ready");
        System.out.flush();
        long end = System.currentTimeMillis() + seconds * 1000L;
        long tick = 0;
        Recording extra = null;
        while (System.currentTimeMillis() < end && stop.getCount() > 0) {
            // A recording that starts and stops makes the JVM begin a new
            // chunk each time: the tests see chunk rotations.
            if (tick == 1 && seconds >= 3 && !Boolean.getBoolean("workload.oneChunk")) {
                extra = new Recording();
                extra.setName("rotate");
                extra.start();
            }
            if (tick == 2 && extra != null) {
                extra.stop();
                extra.close();
            }
            Tick e = new Tick();
            e.seq = tick;
            e.run = runId;
            e.wallMillis = System.currentTimeMillis();
            e.commit();
            System.out.println("tick " + tick++);
            System.out.flush();
            stop.await(Math.min(1000, Math.max(1, end - System.currentTimeMillis())), TimeUnit.MILLISECONDS);
        }
        running = false;
        for (Thread t : workers) {
            t.join(2000);
        }
    }

    static void allocate(int n) {
        List<Object> keep = new ArrayList<>();
        long i = 0;
        while (running) {
            keep.add(new byte[1024 + (int) (i % 4096)]);
            keep.add(new StringBuilder().append("item-").append(i).toString());
            keep.add(new long[64]);
            if (keep.size() > 20000) {
                keep = new ArrayList<>();
            }
            sink = keep;
            i++;
            if (i % 50000 == 0) {
                pause(1);
            }
        }
    }

    static void sleeper() {
        while (running) {
            pause(15);
        }
    }

    static void contend() {
        while (running) {
            synchronized (LOCK) {
                busy(25);
            }
            pause(1);
        }
    }

    static void busy(long millis) {
        long end = System.nanoTime() + millis * 1_000_000L;
        long x = 0;
        while (System.nanoTime() < end) {
            x += Long.numberOfTrailingZeros(x + System.nanoTime());
        }
        sink = x;
    }

    static void thrower() {
        long i = 0;
        while (running) {
            try {
                deep(8, i++);
            } catch (IllegalStateException e) {
                sink = e;
            }
            if (i % THROWS_PER_PAUSE == 0) {
                pause(1);
            }
            if (i % 100 == 0) {
                try {
                    throw new AssertionError("assertion " + i);
                } catch (AssertionError e) {
                    sink = e;
                }
            }
        }
    }

    static void deep(int depth, long i) {
        if (depth == 0) {
            throw new IllegalStateException("failure " + i);
        }
        deep(depth - 1, i);
    }

    static void fileIO() {
        byte[] buf = new byte[64 * 1024];
        try {
            File f = File.createTempFile("workload", ".bin");
            f.deleteOnExit();
            while (running) {
                try (FileOutputStream out = new FileOutputStream(f)) {
                    for (int i = 0; i < 16; i++) {
                        out.write(buf);
                    }
                    out.getFD().sync();
                }
                try (FileInputStream in = new FileInputStream(f)) {
                    while (in.read(buf) > 0) {
                    }
                }
                pause(20);
            }
            f.delete();
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    // socketIO sends 16 KB to a loopback echo server and reads it back,
    // again and again: jdk.SocketWrite and jdk.SocketRead on both ends.
    static void socketIO() {
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            Thread echo = new Thread(() -> {
                try (Socket s = server.accept()) {
                    InputStream in = s.getInputStream();
                    OutputStream out = s.getOutputStream();
                    byte[] b = new byte[8192];
                    int n;
                    while ((n = in.read(b)) > 0) {
                        out.write(b, 0, n);
                    }
                } catch (IOException e) {
                }
            }, "echo-" + Thread.currentThread().getName());
            echo.setDaemon(true);
            echo.start();
            try (Socket s = new Socket(server.getInetAddress(), server.getLocalPort())) {
                InputStream in = s.getInputStream();
                OutputStream out = s.getOutputStream();
                byte[] buf = new byte[16 * 1024];
                while (running) {
                    out.write(buf);
                    int got = 0;
                    while (got < buf.length) {
                        int n = in.read(buf, got, buf.length - got);
                        if (n < 0) {
                            return;
                        }
                        got += n;
                    }
                    pause(5);
                }
            }
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    static void orders() {
        long i = 0;
        Class<?>[] classes = {Item.class, Gadget.class, String.class, int[].class};
        while (running) {
            Checkout c = new Checkout();
            c.begin();
            Order o = new Order();
            o.begin();
            o.id = "order-" + i;
            o.customer = (i % 3 == 0) ? null : (i % 3 == 1) ? "Zoë Müller 東京" : "";
            o.quantity = (int) (i % 7) - 3;
            o.amountCents = i * 1999 - 50000;
            o.price = i * 0.25 - 10.5;
            o.discount = (i % 5) / 8.0f;
            o.express = i % 2 == 0;
            o.grade = (char) ('A' + i % 5);
            o.priority = (byte) (i % 256 - 128);
            o.region = (short) (i * 37 % 65536 - 32768);
            o.itemClass = (i % 5 == 4) ? null : classes[(int) (i % 4)];
            o.handler = Thread.currentThread();
            o.processing = i % 1000;
            o.placedAt = System.currentTimeMillis();
            o.bytes = i * 4096;
            o.flags = (int) (0xFFFFFFF0L + i % 16);
            o.seq = SEQ.incrementAndGet();
            o.run = runId;
            if (i % THROWS_PER_PAUSE == 0) {
                pause(1);
            }
            o.commit();
            c.cart = "cart-" + (i % 10);
            c.items = (int) (i % 10);
            c.waited = i * 1000;
            c.commit();
            i++;
        }
    }

    static void pause(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
