// auto_cpp.cpp — automatic instrumentation of C++: namespaces, classes,
// virtual calls, a template, recursion and an exception. Names are
// demangled ("geo::Square::area() const"); the class signature of a member
// is its scope ("geo::Square"). The standard library's inline code is kept
// out with -finstrument-functions-exclude-file-list=/usr/include.
//
//   auto_cpp
//
// Prints "call <depth> <function>" for every call it makes, then
// "auto_cpp: calls=N sent=S dropped=D".
#include <cstdio>
#include <stdexcept>

#include "tracebridge.h"

#define NOINSTR __attribute__((no_instrument_function))

static int depth_now;
static int calls;

// Call bookkeeping that survives exceptions (its destructor runs while
// unwinding, as gcc's exit hook does).
struct Call {
	NOINSTR explicit Call(const char *name) { open(name); }
	NOINSTR ~Call() { close(); }
	NOINSTR static int open(const char *name)
	{
		std::printf("call %d %s\n", depth_now++, name);
		return ++calls;
	}
	NOINSTR static void close() { depth_now--; }
};

namespace geo {

class Shape {
public:
	explicit Shape(int id) : id_(id) { Call c("geo::Shape::Shape(int)"); }
	virtual double area() const = 0;
	int id() const { return id_; }

private:
	int id_;
};

// The derived constructor is entered before its base is constructed: its
// line is printed from the base initialiser, which runs first.
class Square : public Shape {
public:
	explicit Square(double side) : Shape(Call::open("geo::Square::Square(double)")), side_(side) { Call::close(); }
	double area() const override
	{
		Call c("geo::Square::area() const");
		return side_ * side_;
	}

private:
	double side_;
};

template <typename T> T twice(T x)
{
	Call c("int geo::twice<int>(int)");
	return x + x;
}

} // namespace geo

class Tree {
public:
	static int depth(int n)
	{
		Call c("Tree::depth(int)");
		return n == 0 ? 0 : 1 + depth(n - 1);
	}
};

void risky(int n)
{
	Call c("risky(int)");
	if (n == 2)
		throw std::runtime_error("n is 2");
}

static double measure(const geo::Shape &s)
{
	Call c("measure(geo::Shape const&)");
	return s.area();
}

int main()
{
	Call c("main");
	geo::Square sq(3);
	double total = measure(sq) + geo::twice(21) + Tree::depth(3);
	int caught = 0;
	for (int i = 1; i <= 3; i++) {
		try {
			risky(i);
		} catch (const std::exception &) {
			caught++;
		}
	}
	tb_flush(5000);
	struct tb_stats st;
	tb_get_stats(&st);
	std::printf("auto_cpp: calls=%d total=%g caught=%d sent=%llu dropped=%llu\n", calls, total, caught,
	            (unsigned long long)st.sent, (unsigned long long)st.dropped);
	return 0;
}
