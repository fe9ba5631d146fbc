package TraceBridge::Kieker;

# Kieker's binary record encoding as Kieker's single-socket TCP protocol
# sends it (SingleSocketTcpWriter, default port 10133). Core Perl only;
# needs a perl with 64-bit integers (pack 'q>').
#
# A connection is a stream of record frames with string-registry entries
# interleaved, each entry before the first frame that uses its string:
#
#   registry entry   int32 -1 | int32 id | int32 byte length | UTF-8 bytes
#   record frame     int32 classNameId | int64 loggingTimestamp | fields
#
# big-endian; a string field is the id of a registry entry. Ids start at 0
# per connection, in order of first use: the class name first, then the
# string fields in field order (as Kieker 2.0 and tracebridge's Go encoder
# do), so the same records give the same bytes. A registry belongs to one
# connection: start a new one after reconnecting.

use strict;
use warnings;

BEGIN {
	eval { my $x = pack('q>', 1); 1 } or die "TraceBridge needs a perl with 64-bit integers\n";
}

use Exporter 'import';
our @EXPORT_OK = qw(META BEFORE AFTER FAILED NO_TIMESTAMP MAX_STRING
	TRACE_METADATA BEFORE_OPERATION_EVENT AFTER_OPERATION_EVENT AFTER_OPERATION_FAILED_EVENT
	utf8_bytes);
our %EXPORT_TAGS = (all => \@EXPORT_OK);

# Record kinds the probes hand to a transport, with their fields:
#   META    traceId, threadId, sessionId, hostname, parentTraceId, parentOrderId
#   BEFORE, AFTER   timestamp, traceId, orderIndex, operationSignature, classSignature
#   FAILED  the same and cause
use constant { META => 0, BEFORE => 1, AFTER => 2, FAILED => 3 };

# The logging timestamp of a record that has none (Kieker's default).
use constant NO_TIMESTAMP => -1;

# The longest string sent, in UTF-8 bytes; longer ones are cut at a
# character boundary.
use constant MAX_STRING => 65536;

use constant {
	TRACE_METADATA               => 'kieker.common.record.flow.trace.TraceMetadata',
	BEFORE_OPERATION_EVENT       => 'kieker.common.record.flow.trace.operation.BeforeOperationEvent',
	AFTER_OPERATION_EVENT        => 'kieker.common.record.flow.trace.operation.AfterOperationEvent',
	AFTER_OPERATION_FAILED_EVENT => 'kieker.common.record.flow.trace.operation.AfterOperationFailedEvent',
};

my @CLASS = (TRACE_METADATA, BEFORE_OPERATION_EVENT, AFTER_OPERATION_EVENT, AFTER_OPERATION_FAILED_EVENT);

# utf8_bytes($s) returns the UTF-8 bytes sent for $s: character strings are
# encoded, byte strings that are valid UTF-8 are sent as they are, other
# byte strings are taken as Latin-1; undef is the empty string. The result
# is cut to $max bytes (default MAX_STRING) at a character boundary.
sub utf8_bytes {
	my ($s, $max) = @_;
	return '' unless defined $s;
	$max = MAX_STRING unless defined $max;
	my $b = "$s";
	if (utf8::is_utf8($b)) {
		utf8::encode($b);
	} elsif ($b =~ /[\x80-\xff]/) {
		my $c = $b;
		unless (utf8::decode($c)) {
			utf8::upgrade($b);    # Latin-1 bytes become characters …
			utf8::encode($b);     # … sent as UTF-8
		}
	}
	if (length($b) > $max) {
		$b = substr($b, 0, $max);
		# Drop a character cut in half.
		if ($b =~ /([\xc0-\xff])([\x80-\xbf]*)\z/) {
			my $want = ord($1) >= 0xf0 ? 3 : ord($1) >= 0xe0 ? 2 : 1;
			substr($b, -1 - length($2)) = '' if length($2) < $want;
		}
	}
	return $b;
}

# new returns the empty registry of one connection.
sub new {
	my ($class) = @_;
	return bless { ids => {}, n => 0 }, $class;
}

# reset empties the registry in place (a new connection).
sub reset {
	my ($self) = @_;
	%{ $self->{ids} } = ();
	$self->{n} = 0;
	return;
}

# len returns the number of registered strings.
sub len { return $_[0]{n} }

# id($buf_ref, $s) returns the id of $s, appending its registry entry to
# $$buf_ref when $s is new.
sub id {
	my ($self, $buf, $s) = @_;
	$s = '' unless defined $s;
	my $id = $self->{ids}{$s};
	return $id if defined $id;
	my $b = utf8_bytes($s);
	$id = $self->{n}++;
	$self->{ids}{$s} = $id;
	$$buf .= pack('NNN', 0xFFFFFFFF, $id, length $b) . $b;
	return $id;
}

# append($buf_ref, $kind, @fields) appends the frame of one record (and the
# registry entries it needs) to $$buf_ref. $lts is the frame header's
# logging timestamp: append_lts takes it as its second argument.
sub append {
	my ($self, $buf, $kind, @f) = @_;
	return $self->append_lts($buf, $kind, NO_TIMESTAMP, @f);
}

sub append_lts {
	my ($self, $buf, $kind, $lts, @f) = @_;
	my $ids = $self->{ids};
	my $name = $CLASS[$kind];
	die "TraceBridge::Kieker: unknown record kind $kind\n" unless defined $name;
	my $c = $ids->{$name} // $self->id($buf, $name);
	if ($kind == META) {
		my $ses  = $self->id($buf, $f[2]);
		my $host = $self->id($buf, $f[3]);
		$$buf .= pack('Nq>q>q>NNq>l>', $c, $lts, $f[0], $f[1], $ses, $host, $f[4], $f[5]);
		return;
	}
	my $o = $self->id($buf, $f[3]);
	my $s = $self->id($buf, $f[4]);
	if ($kind == FAILED) {
		my $e = $self->id($buf, $f[5]);
		$$buf .= pack('Nq>q>q>l>NNN', $c, $lts, $f[0], $f[1], $f[2], $o, $s, $e);
		return;
	}
	$$buf .= pack('Nq>q>q>l>NN', $c, $lts, $f[0], $f[1], $f[2], $o, $s);
	return;
}

1;
