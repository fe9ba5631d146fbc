#!/usr/bin/perl
# A small bookstore traced with TraceBridge: a call tree with a failing call
# that is caught, one that is not, manual entry/exit probes as the EPrints
# probes placed them, wrapped subs, and a forked child with its own trace.
#
#   perl examples/bookstore.pl [--transport tcp|stomp] [ROUNDS]
#
# sends to the bridge the TRACEBRIDGE_* variables name (see TraceBridge.pm;
# tcp: 127.0.0.1:10133, stomp: 127.0.0.1:61613 /queue/kieker.tools.bridge).
# The program keeps its own account of the calls it made, independent of
# TraceBridge, and prints one line per trace,
#
#   expect >op >op <op !op <op ...
#
# (">" a call, "<" its return, "!" its death, op the operationSignature),
# then each process's counters as "stats {json}". End-to-end tests compare
# these lines with the records the bridge logged.

use strict;
use warnings;

use FindBin ();
use lib "$FindBin::Bin/../lib";

use Getopt::Long ();
use JSON::PP ();
use TraceBridge;

my $transport = $ENV{TRACEBRIDGE_TRANSPORT} // 'tcp';
Getopt::Long::GetOptions('transport=s' => \$transport) or die "usage: $0 [--transport tcp|stomp] [ROUNDS]\n";
my $rounds = shift(@ARGV) // 1;

my $tb = TraceBridge->new(transport => $transport);

# ---- the example's own account of its calls (not part of TraceBridge) ----

my (@calls, @traces, $depth);

sub expect_event {
	my ($ev) = @_;
	push @calls, $ev;
	$depth += substr($ev, 0, 1) eq '>' ? 1 : -1;
	if ($depth == 0) {
		push @traces, join(' ', @calls);
		@calls = ();
	}
}

# expect_wrap wraps a sub with the account-keeping; TraceBridge's wrap goes
# around it.
sub expect_wrap {
	my ($name, $op) = @_;
	$op //= $name;
	no strict 'refs';
	no warnings 'redefine';
	my $orig = \&{$name};
	*{$name} = sub {
		expect_event(">$op");
		my @r;
		my $want = wantarray;
		my $ok = eval { if ($want) { @r = $orig->(@_) } else { $r[0] = $orig->(@_) } 1 };
		if (!$ok) {
			expect_event("!$op");
			die $@;
		}
		expect_event("<$op");
		return $want ? @r : $r[0];
	};
}

# ---- the bookstore ----

package Catalog;

sub new {
	return bless { books => { '0-13-110362-8' => 'The C Programming Language',
	                          '0-201-63361-2' => 'Design Patterns',
	                          '3-540-43081-4' => 'Software Engineering' } }, shift;
}

sub get_book {
	my ($self, $isbn) = @_;
	die "no such book: $isbn\n" unless exists $self->{books}{$isbn};
	return $self->{books}{$isbn};
}

package CRM;

sub new { my ($class, $catalog) = @_; return bless { catalog => $catalog }, $class }

sub get_offers {
	my ($self, @favourites) = @_;
	return map { $self->{catalog}->get_book($_) } @favourites;
}

package Bookstore;

sub new {
	my ($class) = @_;
	my $catalog = Catalog->new;
	return bless { catalog => $catalog, crm => CRM->new($catalog) }, $class;
}

sub search_book {
	my ($self, $isbn) = @_;
	my $book = $self->{catalog}->get_book($isbn);
	$self->{crm}->get_offers('0-201-63361-2');
	return $book;
}

sub lookup {
	my ($self, $isbn) = @_;
	my $book = eval { $self->{catalog}->get_book($isbn) };    # a failing call, caught
	return $book;
}

# checkout carries manual probes, as the EPrints probes were placed.
sub checkout {
	my ($self, $limit, @cart) = @_;
	$tb->entry('checkout', 'Bookstore');
	main::expect_event('>checkout');
	my $ok = eval {
		my $total = 0;
		for my $isbn (@cart) {
			$self->{catalog}->get_book($isbn);
			$total += 30;
		}
		$self->charge($total, $limit);
		1;
	};
	if (!$ok) {
		my $err = $@;
		main::expect_event('!checkout');
		$tb->failed('checkout', 'Bookstore', $err);
		die $err;
	}
	main::expect_event('<checkout');
	$tb->exit('checkout', 'Bookstore');
	return;
}

sub charge {
	my ($self, $amount, $limit) = @_;
	die "card declined: $amount over the limit $limit\n" if $amount > $limit;
	return;
}

package main;

sub serve_customer {
	my ($store) = @_;
	$store->search_book('0-13-110362-8');
	$store->lookup('9-999-99999-9');
	$store->checkout(100, '0-201-63361-2');
	return;
}

for my $name (qw(Catalog::get_book CRM::get_offers Bookstore::search_book Bookstore::lookup main::serve_customer)) {
	expect_wrap($name);
	$tb->wrap($name);
}
expect_wrap('Bookstore::charge', 'Payment::charge');
$tb->wrap('Bookstore::charge', operation => 'Payment::charge', class => 'Payment');

$| = 1;
my $store = Bookstore->new;
for (1 .. $rounds) {
	serve_customer($store);
	$store->search_book('3-540-43081-4');
	eval { $store->checkout(50, '0-201-63361-2', '3-540-43081-4') };    # dies, not caught here
	my $pid = fork() // die "fork: $!\n";
	if ($pid == 0) {
		@traces = ();
		$store->search_book('0-201-63361-2');
		report();
		exit 0;
	}
	waitpid($pid, 0);
}
report();

sub report {
	print "expect $_\n" for @traces;
	$tb->close;
	print 'stats ', JSON::PP->new->canonical->encode($tb->stats), "\n";
}
