#!/bin/sh
#$ -N boyd
#$ -M someone@example.org
#$ -m bea
#$ -j y
#$ -cwd
#$ -pe openmpi 343 #was 12-36
#$ -q mps_amd.q
#$ -S /bin/bash
# modules:
# gridsched corpus: replaced module add sge
echo module add sge

# gridsched corpus: replaced mpirun -np $NSLOTS $1
echo "slots $NSLOTS"
