# Draws one trace's plot for docs/accuracy.md: a panel per strategy, the most requests admitted in a
# window of length W over time (strategy and reference) against the limit.
#   gnuplot -e "in='series_edges.csv'; out='edges.svg'; title='...'; limit=100" plot.gp
set terminal svg size 900,1200 dynamic noenhanced font "sans,10"
set output out
set datafile separator ","
set key top right horizontal font ",9"
set multiplot layout 6,1 title title
set lmargin 8
set rmargin 2
set ylabel "admitted / W"
set yrange [0:limit * 2.2]
set autoscale xfix
set grid ytics
# The columns' order is the tool's (tools/accuracy/run.cpp, contenders()); any after these six are not drawn.
names = "fixed_window sliding_window@W sliding_window@W/10 sliding_log token_bucket leaky_bucket(meter)"
refs = "log log log log GCRA GCRA"
do for [i=1:6] {
  if (i == 6) { set xlabel "minutes" }
  name = word(names, i)
  ref = word(refs, i) eq "GCRA" ? "exact GCRA" : "exact sliding log"
  set title name offset 0,-0.5
  # The reference wide and pale underneath: where the strategy agrees, the two lines coincide.
  plot in every ::1 using 1:(column(2*i+1)) with lines lw 4 lc rgb "#c8c8c8" title ref, \
       "" every ::1 using 1:(column(2*i)) with lines lw 1.2 lc rgb "#1f77b4" title "strategy", \
       limit with lines dt 2 lw 1.2 lc rgb "#d62728" title "limit"
}
unset multiplot
