package TBTest;

# Test helpers: an independent decoder of Kieker's single-socket stream
# (written from the protocol description, not from TraceBridge::Kieker)
# and a listening socket to read a client's bytes in the same process.

use strict;
use warnings;

use Exporter 'import';
our @EXPORT_OK = qw(decode listener read_all closed_port);

use IO::Select ();
use IO::Socket::INET ();
use Time::HiRes ();

my %LAYOUT = (
	'kieker.common.record.flow.trace.TraceMetadata' =>
		[qw(traceId:q threadId:q sessionId:s hostname:s parentTraceId:q parentOrderId:i)],
	'kieker.common.record.flow.trace.operation.BeforeOperationEvent' =>
		[qw(timestamp:q traceId:q orderIndex:i operationSignature:s classSignature:s)],
	'kieker.common.record.flow.trace.operation.AfterOperationEvent' =>
		[qw(timestamp:q traceId:q orderIndex:i operationSignature:s classSignature:s)],
	'kieker.common.record.flow.trace.operation.AfterOperationFailedEvent' =>
		[qw(timestamp:q traceId:q orderIndex:i operationSignature:s classSignature:s cause:s)],
);

# decode($bytes) returns (\@records, \%registry) of one connection's bytes;
# dies on a malformed stream. Strings are decoded UTF-8 (characters).
sub decode {
	my ($data) = @_;
	my (%reg, @out);
	my $pos = 0;
	my $n   = length $data;
	while ($pos < $n) {
		die "offset $pos: stream ends inside a unit\n" if $pos + 4 > $n;
		my $head = unpack('l>', substr($data, $pos, 4));
		if ($head == -1) {
			die "offset $pos: short entry\n" if $pos + 12 > $n;
			my ($id, $len) = unpack('l>l>', substr($data, $pos + 4, 8));
			die "offset $pos: registry id $id, want " . scalar(keys %reg) . "\n" if $id != keys %reg;
			die "offset $pos: short entry\n" if $pos + 12 + $len > $n;
			my $s = substr($data, $pos + 12, $len);
			utf8::decode($s) or die "offset $pos: invalid UTF-8\n";
			$reg{$id} = $s;
			$pos += 12 + $len;
			next;
		}
		my $class = $reg{$head} // die "offset $pos: unregistered class id $head\n";
		my $layout = $LAYOUT{$class} // die "offset $pos: unknown class $class\n";
		my $p = $pos + 4;
		my %r = (type => ($class =~ /([^.]+)\z/)[0]);
		die "offset $pos: short frame\n" if $p + 8 > $n;
		$r{lts} = unpack('q>', substr($data, $p, 8));
		$p += 8;
		for my $f (@$layout) {
			my ($name, $kind) = split /:/, $f;
			my $size = $kind eq 'q' ? 8 : 4;
			die "offset $pos: short frame\n" if $p + $size > $n;
			my $v = unpack($kind eq 'q' ? 'q>' : 'l>', substr($data, $p, $size));
			if ($kind eq 's') {
				die "offset $p: unregistered string id $v\n" unless exists $reg{$v};
				$v = $reg{$v};
			}
			$r{$name} = $v;
			$p += $size;
		}
		push @out, \%r;
		$pos = $p;
	}
	return (\@out, \%reg);
}

sub listener {
	my $l = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 16, Proto => 'tcp', ReuseAddr => 1)
		or die "listen: $!\n";
	return $l;
}

# read_all($listener, $timeout) accepts every pending connection and reads
# each until it is idle for $timeout seconds; returns their bytes.
sub read_all {
	my ($l, $timeout) = @_;
	$timeout //= 0.3;
	my @conns;
	my $sel = IO::Select->new($l);
	while ($sel->can_read($timeout)) {
		my $c = $l->accept or last;
		push @conns, $c;
	}
	my @out;
	for my $c (@conns) {
		my $buf = '';
		my $cs  = IO::Select->new($c);
		while ($cs->can_read($timeout)) {
			my $n = sysread($c, $buf, 65536, length $buf);
			last unless $n;
		}
		push @out, $buf;
	}
	return @out;
}

sub closed_port {
	my $l = listener();
	my $p = $l->sockport;
	close $l;
	return $p;
}

1;
