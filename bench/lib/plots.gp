# SPDX-License-Identifier: BSD-3-Clause
# Plots of bench/run's results; run by bench/run inside the results folder
# (reads raw/*.dat written by bench/lib/report.py).
load "raw/vars.gp"
set terminal pngcairo size 1200,500 font "sans,10" noenhanced
set logscale x 2
set format x "%.0b%B"
set grid
set key top left
set xlabel "message size (bytes)"

set output "busbw.png"
set multiplot layout 1,2 title "Allreduce busbw (fp32 sum, in place; median of runs, bars: min-max)"
do for [n in "2 4"] {
	set title sprintf("2 nodes, %s ranks", n)
	set ylabel "busbw (GB/s)"
	plot sprintf("raw/plot-libddp-%s.dat", n) using 1:4:5:6 with yerrorlines lw 2 title "libddp", \
	     sprintf("raw/plot-openmpi-%s.dat", n) using 1:4:5:6 with yerrorlines lw 2 title "Open MPI", \
	     sprintf("raw/plot-gloo-%s.dat", n) using 1:4:5:6 with yerrorlines lw 2 title "Gloo", \
	     (ceil1 > 0 ? ceil1 : 1/0) with lines dt 2 lc rgb "black" title "TCP 1 stream (iperf3)", \
	     (ceil4 > 0 ? ceil4 : 1/0) with lines dt 3 lc rgb "gray40" title "TCP 4 streams"
}
unset multiplot

set output "latency.png"
set logscale y 10
set format y "%g"
set multiplot layout 1,2 title "Allreduce time per call (median of runs, bars: min-max of the runs' medians)"
do for [n in "2 4"] {
	set title sprintf("2 nodes, %s ranks", n)
	set ylabel "time (us)"
	plot sprintf("raw/plot-libddp-%s.dat", n) using 1:2:7:8 with yerrorlines lw 2 title "libddp", \
	     sprintf("raw/plot-openmpi-%s.dat", n) using 1:2:7:8 with yerrorlines lw 2 title "Open MPI", \
	     sprintf("raw/plot-gloo-%s.dat", n) using 1:2:7:8 with yerrorlines lw 2 title "Gloo"
}
unset multiplot

if (have_launch) {
set output "launch.png"
set terminal pngcairo size 800,450 font "sans,10" noenhanced
unset logscale
set format x "%g"
set format y "%g"
set title "Launch, 2 nodes x 2 ranks: srun start to first allreduce (median, bars: min-max)"
set ylabel "seconds"
unset xlabel
set style fill solid 0.6
set boxwidth 0.6
set xtics rotate by -20
set yrange [0:*]
unset key
plot "raw/plot-launch.dat" using 1:3:xtic(2) with boxes, \
     "" using 1:3:4:5 with yerrorbars lc rgb "black" pt 0
}
