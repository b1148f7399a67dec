#!/bin/sh
#$ -S /bin/sh

#$ -V
#$ -cwd
#$ -j y
#$ -N off500-5-3
#$ -l m_mem_free=5G    # memory per slot
#$ -l h_rt=1200000
#$ -r y # may run again
#$ -pe orte 8

# gridsched corpus: replaced mpirun -np $NSLOTS $1 -in polymer.lam
echo "slots $NSLOTS"
