# Summaries the benchmark scripts print. Source this file.
#   median              the median of the numbers on stdin, one per line
#   column N LINES      the median of the Nth field of LINES
#   maximum N LINES     the largest Nth field of LINES
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
column() { awk -v c="$1" '{print $c}' <<<"$2" | median; }
maximum() { awk -v c="$1" 'BEGIN {m=0} {if ($c > m) m=$c} END {print m}' <<<"$2"; }
