package TraceBridge::KDB;

# The Kieker Data Bridge's text dialect, as the EPrints Perl probes sent it
# in STOMP text messages:
#
#   <id>;<value>;<value>;…
#
# ids from a mapping file (the probes' 1 = entry/BeforeOperationEvent,
# 2 = exit/AfterOperationEvent, 3 = trace metadata; tracebridge's Perl
# client adds 4 = AfterOperationFailedEvent), values in the record type's
# field order, integers in decimal. In strings a backslash makes the next
# character literal: ';', '\', CR and LF are sent as "\;", "\\", "\<CR>",
# "\<LF>"; NUL characters (which end a STOMP frame) are dropped. Strings are
# sent as UTF-8 (see TraceBridge::Kieker::utf8_bytes) and cut to 65536
# bytes, the original KDB's limit.

use strict;
use warnings;

use Exporter 'import';
our @EXPORT_OK = qw(line escape);

use TraceBridge::Kieker ();

# escape($s) returns $s as one escaped KDB text value (UTF-8 bytes).
sub escape {
	my $b = TraceBridge::Kieker::utf8_bytes($_[0]);
	$b =~ tr/\0//d;
	$b =~ s/([;\\\r\n])/\\$1/g;
	return $b;
}

# line($id, \@types, @values) returns one record as a KDB text line: types
# are 's' for a string (escaped) and 'n' for a number (written as an
# integer; undef and non-numbers are 0, as Perl numifies them).
sub line {
	my ($id, $types, @v) = @_;
	no warnings qw(numeric uninitialized);
	my $out = sprintf('%d', $id);
	for my $i (0 .. $#v) {
		$out .= ';' . ($types->[$i] eq 's' ? escape($v[$i]) : sprintf('%d', $v[$i] // 0));
	}
	return $out;
}

1;
