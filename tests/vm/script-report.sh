# Sourced by tests/vm/run-suite and tests/vm/run-pair: a guest script is one
# test of its own (exit status 0 passes), reported in RESULTS/guest-NAME.xml
# with the end of its output.

# Control characters (a program's colours) are no XML: they go.
xml_escape() { tr -d '\000-\010\013\014\016-\037' | sed 's/&/\&amp;/g; s/</\&lt;/g; s/>/\&gt;/g; s/"/\&quot;/g' | tr '\n' ' '; }

run_script() { # RESULTS EXE NAME
	local results=$1 exe=$2 name=$3 t0=$SECONDS st
	echo "== guest: $name"
	"$exe" 2>&1 | tee "/tmp/script-$name.log"
	st=${PIPESTATUS[0]}
	echo "== guest: $name exited with status $st"
	{
		echo '<?xml version="1.0" encoding="UTF-8"?>'
		echo "<testsuites tests=\"1\" name=\"AllTests\"><testsuite name=\"GuestScript\" tests=\"1\">"
		if [ "$st" -ne 0 ]; then
			echo "<testcase name=\"$name\" time=\"$((SECONDS - t0))\"><failure message=\"exited with status $st: $(tail -n 12 "/tmp/script-$name.log" | xml_escape)\"/></testcase>"
		else
			echo "<testcase name=\"$name\" time=\"$((SECONDS - t0))\"/>"
		fi
		echo '</testsuite></testsuites>'
	} >"$results/guest-$name.xml"
}
