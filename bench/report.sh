#!/usr/bin/env bash
# Plot the benchmark results into one HTML page: bench/out/report.html, one
# SVG (gnuplot) per table, i.e. per corpus or workload of each results file.
#
# Usage: bench/report.sh [-o FILE] [RESULTS.tsv]...
# Without files: the newest results of each script in bench/out/
# (build-*.tsv, compress-*.tsv, ...). The TSV format, which the bench
# scripts write, is in bench/README.md: "# key: value" lines (title,
# threads, x, series, plot), a header row, then one row per measurement
# with a "table" column.
set -eu
. "$(dirname "$0")/lib.sh"

HTML=$OUT/report.html
while [ $# -gt 0 ]; do
	case $1 in
	-o) HTML=$2; shift ;;
	-*) echo "usage: $0 [-o FILE] [RESULTS.tsv]..." >&2; exit 2 ;;
	*) break ;;
	esac
	shift
done
have gnuplot || { echo "$0: gnuplot is missing (apt-get install gnuplot-nox)" >&2; exit 1; }

FILES=("$@")
if [ ${#FILES[@]} -eq 0 ]; then
	declare -A newest=()
	for f in "$OUT"/*-*.tsv; do
		[ -f "$f" ] || continue
		k=$(basename "$f")
		k=${k%-*}
		newest[$k]=$f	# the glob sorts: the last stamp wins
	done
	for k in $(printf '%s\n' "${!newest[@]}" | sort); do
		FILES+=("${newest[$k]}")
	done
fi
[ ${#FILES[@]} -gt 0 ] || { echo "$0: no results (*.tsv) in $OUT" >&2; exit 1; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

meta() { # meta FILE KEY: the values of "# KEY: value" lines, one a line
	sed -n "s/^# $2: //p" "$1"
}

html_escape() { sed 's/&/\&amp;/g; s/</\&lt;/g; s/>/\&gt;/g'; }

# pivot FILE TABLE X SERIES COLUMN DIVISOR: one row per X value, then for
# each series the value (and its min and max when the file has COLUMN_min
# and COLUMN_max): gnuplot's clustered histogram input. The first line
# names the series.
pivot() {
	awk -F'\t' -v table="$2" -v xcol="$3" -v scol="$4" -v vcol="$5" \
		-v div="$6" '
	/^#/ { next }
	!hdr { for (i = 1; i <= NF; i++) col[$i] = i; hdr = 1
	       if (!(vcol in col)) { print "no column " vcol > "/dev/stderr"; exit 1 }
	       bars = (vcol "_min") in col && (vcol "_max") in col; next }
	$col["table"] != table { next }
	{
		x = $col[xcol]; s = scol == "-" ? vcol : $col[scol]
		if (!(x in xi)) { xi[x] = ++nx; xs[nx] = x }
		# a failed run ("nan") leaves a gap; a tool without any
		# figure gets no bar colour at all
		if ($col[vcol] !~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/) next
		if (!(s in si)) { si[s] = ++ns; ss[ns] = s }
		v[x, s] = $col[vcol] / div
		if (bars) { lo[x, s] = $col[vcol "_min"] / div
			    hi[x, s] = $col[vcol "_max"] / div }
	}
	END {
		printf "x"
		for (j = 1; j <= ns; j++) printf "\t%s%s", ss[j], bars ? "\t-\t-" : ""
		printf "\n"
		for (i = 1; i <= nx; i++) {
			x = xs[i]; printf "%s", x
			for (j = 1; j <= ns; j++) {
				s = ss[j]
				val = ((x, s) in v) ? v[x, s] : "NaN"
				printf "\t%s", val
				if (bars) printf "\t%s\t%s", ((x, s) in lo) ? lo[x, s] : "NaN",
						((x, s) in hi) ? hi[x, s] : "NaN"
			}
			printf "\n"
		}
		print ns, bars > "/dev/stderr"
	}' "$1"
}

# plot_table FILE TABLE OUT.svg: one SVG, a panel per "# plot:" line.
plot_table() {
	local f=$1 table=$2 svg=$3 xcol scol title n=0 gp=$WORK/plot.gp
	xcol=$(meta "$f" x | head -n1)
	scol=$(meta "$f" series | head -n1)
	title=$(meta "$f" title | head -n1)
	local -a specs
	mapfile -t specs < <(meta "$f" plot)
	{
		echo "set terminal svg size 900,$((300 * ${#specs[@]} + 60)) dynamic font 'sans,11'"
		echo "set output '$svg'"
		echo "set datafile separator tab"
		echo "set datafile missing 'NaN'"
		echo "set termoption noenhanced"
		echo "set style fill solid 0.8 border -1"
		echo "set key outside right top"
		echo "set grid ytics"
		echo "set yrange [0:*]"
		echo "set xtics rotate by -20"
		[ "$scol" = - ] && echo "set key off"	# one bar per x: no key
		printf 'set multiplot layout %d,1 title "%s: %s"\n' "${#specs[@]}" \
			"${title//\"/}" "${table//\"/}"
	} > "$gp"
	for spec in "${specs[@]}"; do
		read -r vcol unit div label <<< "$spec"
		n=$((n + 1))
		local data=$WORK/data-$n.tsv ns bars style using
		read -r ns bars < <(pivot "$f" "$table" "$xcol" "$scol" "$vcol" \
			"${div:-1}" 2>&1 > "$data")
		if [ "$bars" = 1 ]; then
			style="set style histogram errorbars gap 1 lw 1"
			using="using (column(2+3*i)):(column(3+3*i)):(column(4+3*i)):xtic(1) title columnheader(2+3*i)"
		else
			style="set style histogram clustered gap 1"
			using="using (column(2+i)):xtic(1) title columnheader(2+i)"
		fi
		{
			echo "$style"
			echo "set style data histograms"
			echo "set ylabel '${label:-$vcol} ($unit)'"
			echo "plot for [i=0:$((ns - 1))] '$data' $using"
		} >> "$gp"
	done
	echo "unset multiplot" >> "$gp"
	gnuplot "$gp"
}

{
	echo "<!DOCTYPE html>"
	echo "<html><head><meta charset='utf-8'><title>kiln benchmarks</title>"
	echo "<style>body{font-family:sans-serif;max-width:960px;margin:auto}"
	echo "svg{display:block;margin:1em 0}</style></head><body>"
	echo "<h1>kiln benchmarks</h1>"
} > "$HTML.tmp"
svgs=0
for f in "${FILES[@]}"; do
	title=$(meta "$f" title | head -n1)
	{
		echo "<h2>$(printf '%s' "$title" | html_escape)</h2>"
		echo "<p>$(basename "$f" | html_escape);"
		echo "$(meta "$f" threads | head -n1 | html_escape)</p>"
	} >> "$HTML.tmp"
	tables=$(awk -F'\t' '/^#/ { next } !h { for (i = 1; i <= NF; i++)
		if ($i == "table") c = i; h = 1; next } !seen[$c]++ { print $c }' "$f")
	while IFS= read -r table; do
		[ -n "$table" ] || continue
		svgs=$((svgs + 1))
		plot_table "$f" "$table" "$WORK/$svgs.svg"
		echo "<h3>$(printf '%s' "$table" | html_escape)</h3>" >> "$HTML.tmp"
		sed '/^<?xml/d' "$WORK/$svgs.svg" >> "$HTML.tmp"
	done <<< "$tables"
done
echo "</body></html>" >> "$HTML.tmp"
mv "$HTML.tmp" "$HTML"
echo "report: $HTML ($svgs plots from ${#FILES[@]} result files)" >&2
