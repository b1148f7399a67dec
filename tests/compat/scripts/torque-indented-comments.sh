#!/bin/bash


  # a name for the job (may be left out)
#PBS -N my_serial_job         


  # how long it may run (needed!)
#PBS -l walltime=01:00:00

  # what it needs (needed!)
  #   nodes=   how many nodes; 1 for a serial job
  #   ppn=     cores on each node; 1 for a serial job
#PBS -l nodes=1:ppn=1

  # to have a node to yourself, ask for all of its memory
#  #PBS -l pvmem=16000m


  # mail on events (may be left out); letters combine, as in -m abe
#PBS -m e

# #PBS -M another.address@example.org


  # files for output (-o) and errors (-e) (may be left out)
#PBS -o stdout
#PBS -e stderr


  # back to the directory of qsub
cd $PBS_O_WORKDIR  


  # the work
echo job begins
date
hostname
echo job ends
