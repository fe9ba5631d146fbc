package TraceBridge;

use strict;
use warnings;

our $VERSION = '0.1.0';

use Scalar::Util ();
use Sys::Hostname ();
use Time::HiRes ();

use TraceBridge::Kieker qw(META BEFORE AFTER FAILED);

=encoding utf8

=head1 NAME

TraceBridge - Kieker trace probes for Perl programs, sending to a tracebridge

=head1 SYNOPSIS

 use TraceBridge;
 my $tb = TraceBridge->new(transport => 'tcp');   # Kieker binary to 127.0.0.1:10133
 my $tb = TraceBridge->new(transport => 'stomp');  # KDB text to /queue/kieker.tools.bridge

 $tb->entry('search_book', 'Bookstore');           # BeforeOperationEvent
 $tb->exit('search_book', 'Bookstore');            # AfterOperationEvent
 $tb->failed('get_book', 'Catalog', $@);           # AfterOperationFailedEvent

 my @r = $tb->call('op', 'Class', sub { ... }, @args);   # entry, run, exit or failed + rethrow
 $tb->wrap('Bookstore::search_book');              # instrument a named sub
 $tb->trace_start; ... $tb->trace_end;             # one explicit trace around many calls

 my $s = $tb->stats;  # recorded, sent, queued, dropped, connected, last_error, …

=head1 DESCRIPTION

Records Kieker's event-based traces: a TraceMetadata when a trace starts,
then Before/After/AfterOperationFailed events whose orderIndex counts 0, 1,
2, … within the trace. An entry with no trace open starts one, which ends
when the depth returns to 0 (so every outermost call is a trace), unless
C<trace_start> opened one explicitly, which lasts until C<trace_end>. Trace
ids are per process: the first trace of a process has the process id as its
id (as the EPrints probes did), later ones C<pid + n * 2**32>.

Two transports:

=over

=item tcp (core Perl only)

Kieker binary records over Kieker's single-socket TCP protocol to a
tracebridge C<kieker-tcp> receiver, default 127.0.0.1:10133. TraceMetadata
is written as Kieker's Java probes write a root trace: threadId 0, sessionId
C<< <no-session-id> >>, parentTraceId = traceId, parentOrderId -1.

=item stomp (Net::Stomp, Debian package libnet-stomp-perl)

KDB text messages, as the EPrints probes sent them, to a broker queue
(default /queue/kieker.tools.bridge on 127.0.0.1:61613, login guest/guest)
for a tracebridge C<stomp-client> receiver with a mapping file of
C<1=…BeforeOperationEvent>, C<2=…AfterOperationEvent>,
C<3=kieker.common.record.flow.trace.Trace> and C<4=…AfterOperationFailedEvent>
(examples/kieker-perl.map). The trace line is the probes' own:
C<3;traceId;0;0;host;0;0>.

=back

The program never waits long and never dies for monitoring: records are
buffered (bounded), written without blocking (tcp) or with bounded blocking
(stomp), dropped and counted when the bridge is unreachable or the buffer
is full, and reconnects back off exponentially. At exit (an END block)
every instance flushes for at most C<exit_timeout> seconds (2) and prints a
line on STDERR when records were dropped. After C<fork> the child starts
with no open trace and its own connection; calls open at the fork record
nothing more in the child.

Environment (the defaults of C<new>): TRACEBRIDGE_TRANSPORT (tcp|stomp),
TRACEBRIDGE_HOST, TRACEBRIDGE_PORT, TRACEBRIDGE_ENABLED (0 disables),
TRACEBRIDGE_DESTINATION, TRACEBRIDGE_LOGIN, TRACEBRIDGE_PASSCODE,
TRACEBRIDGE_VHOST.

An instance is not thread-safe (Perl ithreads each need their own).

=head1 METHODS

=head2 new(%options)

transport (tcp; an unknown one warns and disables the probes), host, port (10133 tcp, 61613 stomp), enabled (1),
hostname (Sys::Hostname), session_id, thread_id (0), exit_timeout (2),
report_drops (1), max_cause (1024 characters). tcp: max_buffer (4 MiB),
flush_bytes (64 KiB), flush_interval (0.2 s), connect_timeout (1),
backoff_min (0.1), backoff_max (10), max_registry (1 << 20),
logging_timestamps (0). stomp: destination, login, passcode, vhost,
ids ({entry=>1, exit=>2, trace=>3, failed=>4}; failed 0 sends a failed
call as an exit), max_queue (100000 records), flush_count (100),
flush_interval (0.2), records_per_message (1), connect_timeout (1),
send_timeout (5), backoff_min, backoff_max.

=cut

my %LIVE;    # every instance, weakly, for the END flush

sub new {
	my ($class, %o) = @_;
	my $transport = lc($o{transport} // $ENV{TRACEBRIDGE_TRANSPORT} // 'tcp');
	my %t = (host => $o{host} // $ENV{TRACEBRIDGE_HOST} // '127.0.0.1');
	$t{port} = $o{port} // $ENV{TRACEBRIDGE_PORT};
	delete $t{port} unless defined $t{port} && length $t{port};
	for my $k (qw(max_buffer flush_bytes flush_interval connect_timeout send_timeout backoff_min backoff_max
		max_registry logging_timestamps max_queue flush_count records_per_message ids failed_id)) {
		$t{$k} = $o{$k} if exists $o{$k};
	}
	my $w;
	my $bad;
	if ($transport ne 'stomp' && $transport ne 'tcp') {
		# A typo in TRACEBRIDGE_TRANSPORT must not stop the program: warn, record nothing.
		warn "TraceBridge: unknown transport '$transport' (tcp or stomp): probes disabled\n";
		$bad       = 1;
		$transport = 'tcp';
	}
	if ($transport eq 'stomp') {
		$t{destination} = $o{destination} // $ENV{TRACEBRIDGE_DESTINATION};
		$t{login}       = $o{login} // $ENV{TRACEBRIDGE_LOGIN};
		$t{passcode}    = $o{passcode} // $ENV{TRACEBRIDGE_PASSCODE};
		$t{vhost}       = $o{vhost} // $ENV{TRACEBRIDGE_VHOST};
		defined $t{$_} or delete $t{$_} for keys %t;
		require TraceBridge::STOMP;
		$w = TraceBridge::STOMP->new(%t);
	} else {
		require TraceBridge::TCP;
		$w = TraceBridge::TCP->new(%t);
	}
	my $enabled = $o{enabled} // $ENV{TRACEBRIDGE_ENABLED} // 1;
	$enabled = 0 if $enabled =~ /^\s*(0|false|no|off)\s*\z/i || $bad;
	my $eprints = $transport eq 'stomp';
	my $self = bless {
		w            => $w,
		transport    => $transport,
		enabled      => $enabled ? 1 : 0,
		hostname     => $o{hostname} // (eval { Sys::Hostname::hostname() } || '<default-host>'),
		session_id   => $o{session_id} // ($eprints ? '0' : '<no-session-id>'),
		thread_id    => $o{thread_id} // 0,
		eprints_root => $eprints,    # root traces as the probes wrote them: parent 0/0
		exit_timeout => $o{exit_timeout} // 2,
		report_drops => $o{report_drops} // 1,
		max_cause    => $o{max_cause} // 1024,
		unbalanced   => 0,
	}, $class;
	$self->_reset_traces;
	$self->_bind_event;
	my $key = Scalar::Util::refaddr($self);
	$LIVE{$key} = $self;
	Scalar::Util::weaken($LIVE{$key});
	return $self;
}

sub _reset_traces {
	my ($self) = @_;
	$self->{pid}      = $$;
	$self->{ntraces}  = 0;
	$self->{trace}    = 0;
	$self->{order}    = 0;
	$self->{depth}    = 0;
	$self->{open}     = 0;
	$self->{explicit} = 0;
}

sub _after_fork {
	my ($self) = @_;
	$self->_reset_traces;
	$self->{w}->after_fork;
	$self->_bind_event;
	$self->{unbalanced} = 0;
}

# _bind_event sets ev, the transport's record function (a closure where the
# transport offers one: the probes' hot path).
sub _bind_event {
	my ($self) = @_;
	my $w = $self->{w};
	$self->{ev} = $w->can('event_sub') ? $w->event_sub : sub { $w->record(@_) };
}

# The time in ns, microsecond precision (as the EPrints probes measured).
sub _now {
	my ($s, $us) = Time::HiRes::gettimeofday();
	return $s * 1_000_000_000 + $us * 1000;
}

=head2 enabled / set_enabled($on)

Whether probes record; a disabled probe costs one test.

=cut

sub enabled { return $_[0]{enabled} }
sub set_enabled { $_[0]{enabled} = $_[1] ? 1 : 0; return }

=head2 trace_start(%meta)

Starts a new trace (ending one that is open) and returns its id. Optional
parent_trace_id and parent_order_id link it to a trace of another process;
session_id and thread_id override the instance's.

=cut

sub trace_start {
	my ($self, %m) = @_;
	return 0 unless $self->{enabled};
	$self->_after_fork if $self->{pid} != $$;
	$self->_start(%m);
	$self->{explicit} = 1;
	return $self->{trace};
}

sub _start {
	my ($self, %m) = @_;
	my $id = $$ + $self->{ntraces}++ * 4294967296;
	$self->{trace} = $id;
	$self->{order} = 0;
	$self->{depth} = 0;
	$self->{open}  = 1;
	$self->{explicit} = 0;
	my ($ptrace, $porder) = $self->{eprints_root} ? (0, 0) : ($id, -1);
	$ptrace = $m{parent_trace_id} if defined $m{parent_trace_id};
	$porder = $m{parent_order_id} if defined $m{parent_order_id};
	$self->{ev}->(META, _now(), $id, $m{thread_id} // $self->{thread_id},
		$m{session_id} // $self->{session_id}, $self->{hostname}, $ptrace, $porder);
}

=head2 trace_end

Ends the open trace; the next entry starts a new one.

=cut

sub trace_end {
	my ($self) = @_;
	$self->{open} = $self->{explicit} = $self->{depth} = 0;
	return;
}

=head2 current_trace

Returns (traceId, next orderIndex, depth) of the open trace, or an empty
list.

=cut

sub current_trace {
	my ($self) = @_;
	return () unless $self->{open} && $self->{pid} == $$;
	return ($self->{trace}, $self->{order}, $self->{depth});
}

=head2 entry($operation, $class) / exit($operation, $class) / failed($operation, $class, $cause)

Record a BeforeOperationEvent, an AfterOperationEvent or an
AfterOperationFailedEvent (cause: a string or an exception object, cut to
max_cause characters, trailing newline removed). An exit or failed with no
call open records nothing and is counted as unbalanced.

=cut

sub entry {
	my ($self, $op, $cls) = @_;
	return 0 unless $self->{enabled};
	$self->_after_fork if $self->{pid} != $$;
	$self->_start unless $self->{open};
	$self->{depth}++;
	my ($sec, $us) = Time::HiRes::gettimeofday();
	my $t = $sec * 1_000_000_000 + $us * 1000;
	return $self->{ev}->(BEFORE, $t, $t, $self->{trace}, $self->{order}++, $op, $cls);
}

sub exit {
	my ($self, $op, $cls) = @_;
	return 0 unless $self->{enabled};
	$self->_after_fork if $self->{pid} != $$;
	if ($self->{depth} <= 0) {
		$self->{unbalanced}++;
		return 0;
	}
	my ($sec, $us) = Time::HiRes::gettimeofday();
	my $t = $sec * 1_000_000_000 + $us * 1000;
	my $r = $self->{ev}->(AFTER, $t, $t, $self->{trace}, $self->{order}++, $op, $cls);
	$self->{open} = 0 if --$self->{depth} == 0 && !$self->{explicit};
	return $r;
}

sub failed {
	my ($self, $op, $cls, $cause) = @_;
	return 0 unless $self->{enabled};
	$self->_after_fork if $self->{pid} != $$;
	if ($self->{depth} <= 0) {
		$self->{unbalanced}++;
		return 0;
	}
	$cause = defined $cause ? "$cause" : '';
	$cause =~ s/\s+\z//;
	$cause = substr($cause, 0, $self->{max_cause}) if length($cause) > $self->{max_cause};
	my $t = _now();
	my $r = $self->{ev}->(FAILED, $t, $t, $self->{trace}, $self->{order}++, $op, $cls, $cause);
	$self->{open} = 0 if --$self->{depth} == 0 && !$self->{explicit};
	return $r;
}

=head2 call($operation, $class, $code, @args)

Runs C<< $code->(@args) >> in the caller's context between an entry and an
exit; when it dies, records failed with the error and dies again with the
same error. @args stay aliased.

=cut

sub call {
	my $self = shift;
	my $op   = shift;
	my $cls  = shift;
	my $code = shift;
	return $code->(@_) unless $self->{enabled};
	$self->entry($op, $cls);
	my $want = wantarray;
	my @r;
	my $ok = eval {
		if ($want) {
			@r = $code->(@_);
		} elsif (defined $want) {
			$r[0] = $code->(@_);
		} else {
			$code->(@_);
		}
		1;
	};
	if (!$ok) {
		my $err = $@;
		$self->failed($op, $cls, $err);
		die $err;
	}
	$self->exit($op, $cls);
	return $want ? @r : $r[0];
}

=head2 wrap($name, operation => …, class => …)

Replaces the named sub (C<Package::name>, or a name in the caller's
package) with one that runs it through C<call>. The operation defaults to
the full name C<Package::name>, the class to the package. Returns the
original code reference.

=cut

sub wrap {
	my ($self, $name, %o) = @_;
	my $full = $name =~ /::/ ? $name : caller() . "::$name";
	my ($pkg, $sub) = $full =~ /\A(.*)::([^:]+)\z/ or die "TraceBridge::wrap: bad name '$name'\n";
	no strict 'refs';
	defined &{$full} or die "TraceBridge::wrap: no sub $full\n";
	my $orig = \&{$full};
	my $op   = $o{operation} // $full;
	my $cls  = $o{class} // $pkg;
	my $tb   = $self;
	no warnings 'redefine';
	*{$full} = sub { $tb->call($op, $cls, $orig, @_) };
	return $orig;
}

=head2 stats

A hash reference: recorded, sent, queued, dropped (= dropped_queue_full +
dropped_unreachable), bytes_sent, connected, connects, connect_failures,
last_error, bridge, and unbalanced (exits without an entry).

=cut

sub stats {
	my ($self) = @_;
	my $s = $self->{w}->stats;
	$s->{unbalanced} = $self->{unbalanced};
	$s->{transport}  = $self->{transport};
	return $s;
}

=head2 flush($timeout) / close($timeout)

flush sends what is buffered, trying to connect at once whatever the
back-off, waiting at most $timeout seconds (default 2; STOMP's waits are
bounded by its connect and send timeouts); what cannot be sent is dropped
and counted. close flushes and disconnects; records after it are counted
and not sent. Both are safe to call twice.

=cut

sub flush {
	my ($self, $timeout) = @_;
	return 1 if $self->{pid} != $$;
	return $self->{w}->flush($timeout // $self->{exit_timeout});
}

sub close {
	my ($self, $timeout) = @_;
	return 1 if $self->{pid} != $$;
	return $self->{w}->close($timeout // $self->{exit_timeout});
}

sub _at_exit {
	my ($self) = @_;
	return if $self->{pid} != $$;
	$self->close;
	return unless $self->{report_drops};
	my $s = $self->stats;
	return unless $s->{dropped} || $s->{queued};
	printf STDERR "tracebridge: %d of %d records dropped, %d unsent (bridge %s: %s)\n",
		$s->{dropped}, $s->{recorded}, $s->{queued}, $s->{bridge}, $s->{last_error} // 'no error';
}

END {
	local ($?, $!, $@);
	for my $tb (grep { defined } values %LIVE) {
		eval { $tb->_at_exit; 1 };
	}
}

sub DESTROY {
	my ($self) = @_;
	return if ${^GLOBAL_PHASE} eq 'DESTRUCT';
	delete $LIVE{ Scalar::Util::refaddr($self) };
	local ($?, $!, $@);
	eval { $self->_at_exit; 1 };
}

1;
